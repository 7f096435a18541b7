package config

import (
	"fmt"
	"io"
	"os"
)

// tooLargeError is a config file over the size limit.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string { return fmt.Sprintf("larger than %d bytes", e.limit) }

// readLimited reads the file at path whole if it holds at most limit
// bytes. A larger file is refused without being read (by its size, or,
// for a pipe or a file that grows, after limit+1 bytes) with a
// *tooLargeError. A directory is refused with the error os.ReadFile
// gives.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, &tooLargeError{limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err // a *PathError: "is a directory", for one
	}
	if int64(len(data)) > limit {
		return nil, &tooLargeError{limit}
	}
	return data, nil
}

// byteSize formats n bytes for a message: "1 MiB", "512 KiB", "1000 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
