package podexec

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ResolveIn turns p, a path inside the root file system at root, into a host path,
// following symlinks as if root were "/": an absolute link restarts at root and ".."
// never climbs above it, so nothing in an image (a link to /etc or ../../..) can make
// a layer entry or a mount point land outside it. With mkdir, missing directories on
// the way are created (0755); else a missing component ends the walk and the rest is
// joined as it is.
func ResolveIn(root, p string, mkdir bool) (string, error) {
	root = filepath.Clean(root)
	todo := splitPath(p)
	var cur []string // resolved components, each an existing non-symlink (or created)
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
			continue
		}
		host := filepath.Join(root, filepath.Join(append(cur, c)...))
		st, err := os.Lstat(host)
		switch {
		case os.IsNotExist(err) && mkdir && len(todo) > 0:
			if err := os.Mkdir(host, 0o755); err != nil && !os.IsExist(err) {
				return "", err
			}
		case os.IsNotExist(err):
			return filepath.Join(root, filepath.Join(append(append(cur, c), todo...)...)), nil
		case err != nil:
			return "", err
		case st.Mode()&os.ModeSymlink != 0:
			if hops++; hops > 255 {
				return "", fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			link, err := os.Readlink(host)
			if err != nil {
				return "", err
			}
			if path.IsAbs(link) {
				cur = nil
			}
			todo = append(splitPath(link), todo...)
			continue
		case len(todo) > 0 && !st.IsDir():
			return "", fmt.Errorf("%s: %s is not a directory", p, "/"+path.Join(append(cur, c)...))
		}
		cur = append(cur, c)
	}
	return filepath.Join(root, filepath.Join(cur...)), nil
}

// splitPath splits a slash path into its components, dropping "" and ".".
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
