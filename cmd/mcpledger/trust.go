package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpledger/mcpledger/runtime/config"
)

// TrustCommand adds a directory to trustedFolders in the user config, so
// stdio servers from that workspace may spawn.
type TrustCommand struct{ env *env }

// Run parses args and edits the user config.
func (c *TrustCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("trust", "DIR")
	if err := f.Parse(args); err != nil {
		return err
	}
	dir, err := f.oneArg("")
	if err != nil {
		return err
	}
	if dir == "" {
		f.Usage()
		return usageErrorf("trust: name the workspace directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("trust: %s is not a directory", abs)
	}
	lookup := func(k string) (string, bool) { return os.LookupEnv(k) }
	userDir := config.UserDir(lookup, c.env.getenv("HOME"))
	if userDir == "" {
		return errors.New("trust: no user config directory: set XDG_CONFIG_HOME or HOME")
	}
	path := filepath.Join(userDir, "config.json")
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("trust: %s is not plain JSON (comments?): add %q to its \"trustedFolders\" by hand (%v)", path, abs, err)
		}
	}
	var folders []string
	if raw, ok := doc["trustedFolders"]; ok {
		if err := json.Unmarshal(raw, &folders); err != nil {
			return fmt.Errorf("trust: %s: \"trustedFolders\" is not a list of strings; fix it by hand", path)
		}
	}
	if slices.Contains(folders, abs) {
		fmt.Fprintf(c.env.stdout, "%s is already trusted (%s)\n", abs, path)
		return nil
	}
	folders = append(folders, abs)
	doc["trustedFolders"], _ = json.Marshal(folders)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(userDir, 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(bytes.TrimSpace(out), '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "trusted %s (%s); a running mcpledger picks it up\n", abs, path)
	return nil
}
