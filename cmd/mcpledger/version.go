package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion is what the build info says of this binary: its module
// version, the commit it was built from, and the Go toolchain.
type buildVersion struct {
	Version    string `json:"version"`     // module version, "(devel)" for a build from a checkout
	Commit     string `json:"commit"`      // VCS revision, "" when the build recorded none
	CommitTime string `json:"commit_time"` // RFC 3339, "" when unknown
	Dirty      bool   `json:"dirty"`       // the checkout had uncommitted changes
	Go         string `json:"go"`          // Go version
	Platform   string `json:"platform"`    // GOOS/GOARCH
}

// readBuildVersion reads bi (debug.ReadBuildInfo's; nil when the binary
// carries none).
func readBuildVersion(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Dirty = s.Value == "true"
		}
	}
	return v
}

// String is the text `mcpledger version` prints: one line.
func (v buildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcpledger %s", v.Version)
	switch {
	case v.Commit != "":
		fmt.Fprintf(&b, ", commit %s", v.Commit)
		if v.Dirty {
			b.WriteString("+dirty")
		}
		if v.CommitTime != "" {
			fmt.Fprintf(&b, " (%s)", v.CommitTime)
		}
	default:
		b.WriteString(", commit unknown (built without VCS information)")
	}
	fmt.Fprintf(&b, ", %s %s\n", v.Go, v.Platform)
	return b.String()
}

// thisBuild is the build version of the running binary.
func thisBuild() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return readBuildVersion(bi)
}

// versionCommand is `mcpledger version [--json]`.
func (e *env) versionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from (+dirty: with uncommitted changes) and the Go version, from the binary's build info.",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := thisBuild()
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			_, err := fmt.Fprint(e.stdout, v)
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return c
}
