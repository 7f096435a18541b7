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

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
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
	path, added, err := c.env.trustFolder(abs)
	if err != nil {
		return err
	}
	if !added {
		fmt.Fprintf(c.env.stdout, "%s is already trusted (%s)\n", abs, path)
		return nil
	}
	fmt.Fprintf(c.env.stdout, "trusted %s (%s); a running mcpledger picks it up\n", abs, path)
	c.nextApprovals(ctx, f, abs)
	return nil
}

// nextApprovals prints the command that approves the gated servers of
// workspace ws whose configs wait for an approval, if any: what a
// trusted workspace's servers still need (best effort: nothing is
// printed when the config or the journal cannot be read).
func (c *TrustCommand) nextApprovals(ctx context.Context, f *commandFlags, ws string) {
	cf := configFlags{workspace: ws}
	rows, err := (&ApprovalsCommand{env: c.env}).offline(ctx, f, &cf)
	if err != nil {
		return
	}
	var status []projections.ServerStatus
	for _, name := range pendingNames(rows) {
		status = append(status, projections.ServerStatus{Name: name, State: events.StateStopped, Reason: events.ReasonPendingApproval})
	}
	cwd, _ := os.Getwd()
	if cmd, _ := nextStep(status, ws, cwd); cmd != "" {
		fmt.Fprintf(c.env.stdout, "next: %s (their configs wait for an approval)\n", cmd)
	}
}

// trustFolder adds abs (absolute, canonical) to trustedFolders in the
// user config, atomically, keeping the file's other keys. It returns the
// file's path and whether abs was added (false: it was there already).
func (e *env) trustFolder(abs string) (path string, added bool, err error) {
	lookup := func(k string) (string, bool) { return os.LookupEnv(k) }
	userDir := config.UserDir(lookup, e.getenv("HOME"))
	if userDir == "" {
		return "", false, errors.New("trust: no user config directory: set XDG_CONFIG_HOME or HOME")
	}
	path = filepath.Join(userDir, "config.json")
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return path, false, err
	default:
		if err := json.Unmarshal(b, &doc); err != nil {
			return path, false, fmt.Errorf("trust: %s is not plain JSON (comments?): add %q to its \"trustedFolders\" by hand (%v)", path, abs, err)
		}
	}
	var folders []string
	if raw, ok := doc["trustedFolders"]; ok {
		if err := json.Unmarshal(raw, &folders); err != nil {
			return path, false, fmt.Errorf("trust: %s: \"trustedFolders\" is not a list of strings; fix it by hand", path)
		}
	}
	if slices.Contains(folders, abs) {
		return path, false, nil
	}
	folders = append(folders, abs)
	doc["trustedFolders"], _ = json.Marshal(folders)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return path, false, err
	}
	if err := os.MkdirAll(userDir, 0o700); err != nil {
		return path, false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(bytes.TrimSpace(out), '\n'), 0o600); err != nil {
		return path, false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return path, false, err
	}
	return path, true, nil
}
