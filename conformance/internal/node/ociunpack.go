package node

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"aether-edge/conformance/internal/podexec"
)

// applyTar applies one layer to rootfs: entries are created as the layer says (owner
// only when we are root), whiteouts (.wh.NAME, .wh..wh..opq) remove what lower layers
// put there, and every parent is resolved inside rootfs (podexec.ResolveIn), so no
// entry can be written outside it.
func applyTar(rootfs string, r io.Reader, gzipped bool) error {
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	asRoot := os.Geteuid() == 0
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + hdr.Name)
		if name == "/" {
			continue
		}
		parent, err := podexec.ResolveIn(rootfs, path.Dir(name), true)
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		// (ResolveIn made the missing parents above it; a layer may omit directories)
		if err := os.Mkdir(parent, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		base := path.Base(name)
		if base == ".wh..wh..opq" {
			entries, err := os.ReadDir(parent)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
					return err
				}
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(parent, strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		target := filepath.Join(parent, base)
		mode := hdr.FileInfo().Mode()
		if st, err := os.Lstat(target); err == nil && !(st.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(target); err != nil {
				return err
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			dirs = append(dirs, dirTime{target, hdr.ModTime})
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			lname := path.Clean("/" + hdr.Linkname)
			lparent, err := podexec.ResolveIn(rootfs, path.Dir(lname), false)
			if err != nil {
				return err
			}
			if err := os.Link(filepath.Join(lparent, path.Base(lname)), target); err != nil {
				return err
			}
			continue // owner and mode are the linked file's
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			if !asRoot {
				continue
			}
			dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
			kind := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[hdr.Typeflag]
			if err := unix.Mknod(target, kind|uint32(mode.Perm()), int(dev)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: tar entry type %q not supported", hdr.Name, hdr.Typeflag)
		}
		if asRoot {
			if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
				return err
			}
		}
		if hdr.Typeflag != tar.TypeSymlink {
			// After chown, which clears set-id bits.
			if err := os.Chmod(target, mode&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
				return err
			}
		}
		if hdr.Typeflag != tar.TypeDir {
			ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
			_ = unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	// Directory times last: their entries changed them.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t)
	}
	return nil
}
