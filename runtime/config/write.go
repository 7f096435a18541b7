package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxEditBytes bounds a file an edit reads. It is larger than
// DefaultMaxFileBytes because Claude Code's ~/.claude.json holds its
// per-project state beside the servers and grows to megabytes.
const maxEditBytes = 64 << 20

// editAttempts is how many times editFile redoes an edit when the file
// changed under it (another program writing it between the read and the
// rename).
const editAttempts = 3

// ErrConcurrentEdit is returned when the file kept changing while it was
// edited: nothing was written.
var ErrConcurrentEdit = errors.New("config: the file kept changing while it was edited; nothing was written: try again")

// editFile applies edit to the file at path and replaces it atomically:
// the new text is written to a temporary file in the same directory,
// synced, given the old file's permissions (newMode for a new file) and
// renamed over it, then the directory is synced. A symlink is followed:
// its target is replaced, the link kept. If the file changes between the
// read and the rename, the edit is redone on the new text (up to
// editAttempts times). edit receives nil for a missing file. When edit
// returns the text unchanged (or nothing for a missing file) nothing is
// written.
func editFile(path string, newMode fs.FileMode, edit func(old []byte) ([]byte, error)) error {
	target := path
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		t, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%s is a symlink that does not resolve: %w; fix or remove the link", path, err)
		}
		target = t
	}
	for range editAttempts {
		old, mode, err := readForEdit(target, newMode)
		if err != nil {
			return err
		}
		text, err := edit(old)
		if err != nil {
			return err
		}
		if bytes.Equal(text, old) { // nothing to do (nor a file to create)
			return nil
		}
		dir := filepath.Dir(target)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		tmp, err := writeTemp(dir, filepath.Base(target), text, mode)
		if err != nil {
			return err
		}
		now, _, err := readForEdit(target, newMode)
		if err != nil || !bytes.Equal(now, old) || (now == nil) != (old == nil) {
			os.Remove(tmp)
			if err != nil {
				return err
			}
			continue
		}
		if err := os.Rename(tmp, target); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("replace %s: %w", target, err)
		}
		syncDir(dir)
		return nil
	}
	return fmt.Errorf("%s: %w", target, ErrConcurrentEdit)
}

// readForEdit reads the file whole (nil when it does not exist) and its
// permissions (mode for a missing file).
func readForEdit(path string, mode fs.FileMode) ([]byte, fs.FileMode, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, mode, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file; it cannot be edited", path)
	}
	data, err := readLimited(path, maxEditBytes)
	var tl *tooLargeError
	if errors.As(err, &tl) {
		return nil, 0, fmt.Errorf("%s is larger than %s; it is not edited: shrink it", path, byteSize(maxEditBytes))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi.Mode().Perm(), nil
}

func writeTemp(dir, base string, text []byte, mode fs.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write beside %s: %w", filepath.Join(dir, base), err)
	}
	name := f.Name()
	_, err = f.Write(text)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return name, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
