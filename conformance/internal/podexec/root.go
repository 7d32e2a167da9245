package podexec

// A container run from an image (container-exec --rootfs …), in its private mount
// namespace:
//
//	tmpfs on SCRATCH ── upper/ work/ ─┐
//	image rootfs (read-only lower) ───┴─ overlay on SCRATCH/root  (its writable view;
//	                                     gone with the namespace, the image untouched)
//	  /proc   proc            /dev   tmpfs: null zero full random urandom tty (bound
//	  /sys    sysfs, ro              from the host), fd/std* links, shm (tmpfs)
//	  volumes bound at their mount paths (mount points made in the overlay)
//	pivot_root → root remounted read-only if readOnlyRootFilesystem
//	→ setgroups/setgid/setuid (the image's user or securityContext) → execve
//
// Mount points are resolved inside the image (ResolveIn): an image's symlinks cannot
// send a volume, or a created directory, onto the host.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Root says how to make a container's root file system from an image.
type Root struct {
	Rootfs     string // the unpacked image (overlay lower dir; never written)
	Scratch    string // an empty directory for the tmpfs holding the overlay upper, work and root dirs
	ReadOnly   bool   // readOnlyRootFilesystem
	NoNewPrivs bool   // allowPrivilegeEscalation: false
	UID, GID   uint32
	Groups     []uint32
}

// Args renders the flags for Root (to go before Args' output).
func (r Root) Args() []string {
	out := []string{"--rootfs", r.Rootfs, "--scratch", r.Scratch,
		"--uid", strconv.FormatUint(uint64(r.UID), 10), "--gid", strconv.FormatUint(uint64(r.GID), 10)}
	if len(r.Groups) > 0 {
		var gs []string
		for _, g := range r.Groups {
			gs = append(gs, strconv.FormatUint(uint64(g), 10))
		}
		out = append(out, "--groups", strings.Join(gs, ","))
	}
	if r.ReadOnly {
		out = append(out, "--readonly-root")
	}
	if r.NoNewPrivs {
		out = append(out, "--no-new-privs")
	}
	return out
}

func parseGroups(s string) ([]uint32, error) {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--groups %q: %w", s, err)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// enterRoot builds the container's root file system and pivots into it; the caller
// then sets the credentials and execs.
func enterRoot(r Root, mounts []Mount) error {
	for _, p := range []string{r.Rootfs, r.Scratch} {
		if strings.ContainsAny(p, ",:") {
			return fmt.Errorf("%s: overlay paths cannot hold ',' or ':'", p)
		}
	}
	if err := unix.Mount("scratch", r.Scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", r.Scratch, err)
	}
	upper, work, root := filepath.Join(r.Scratch, "upper"), filepath.Join(r.Scratch, "work"), filepath.Join(r.Scratch, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", r.Rootfs, upper, work)
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s (%s): %w", root, opts, err)
	}
	if err := mountIn(root, "/proc", "proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := mountIn(root, "/sys", "sysfs", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return err
	}
	if err := makeDev(root); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	// Parents before children, so a nested mount lands inside its parent volume.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	for _, m := range mounts {
		st, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("mount source: %w", err)
		}
		target, err := mountPoint(root, m.Target, st.IsDir())
		if err != nil {
			return fmt.Errorf("mount target %s: %w", m.Target, err)
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", m.Target, err)
			}
		}
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if r.ReadOnly {
		if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount / read-only: %w", err)
		}
	}
	return nil
}

// mountPoint makes target (inside root) exist as a directory or an empty file.
func mountPoint(root, target string, dir bool) (string, error) {
	p, err := ResolveIn(root, target, true)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if dir {
		return p, os.Mkdir(p, 0o755)
	}
	return p, os.WriteFile(p, nil, 0o644)
}

func mountIn(root, target, source, fstype string, flags uintptr, data string) error {
	p, err := mountPoint(root, target, true)
	if err != nil {
		return err
	}
	if err := unix.Mount(source, p, fstype, flags, data); err != nil {
		return fmt.Errorf("%s on %s: %w", fstype, target, err)
	}
	return nil
}

// makeDev gives the container the minimal /dev a runtime gives (no pts, no console).
func makeDev(root string) error {
	dev, err := mountPoint(root, "/dev", true)
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=0755,size=65536k"); err != nil {
		return err
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := filepath.Join(dev, name)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+name, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", name, err)
		}
	}
	for name, link := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(link, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	// Its own /dev/shm, as each pod has (Envoy's hot-restart memory, for one).
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	return unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=65536k")
}

// becomeUser drops to the container's user; the caller execs next.
func becomeUser(r Root) error {
	groups := make([]int, 0, len(r.Groups))
	for _, g := range r.Groups {
		groups = append(groups, int(g))
	}
	// syscall's versions change every thread; no_new_privs is per thread, set on the
	// one that execs (Main keeps to one).
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups %v: %w", groups, err)
	}
	if err := syscall.Setresgid(int(r.GID), int(r.GID), int(r.GID)); err != nil {
		return fmt.Errorf("setgid %d: %w", r.GID, err)
	}
	if err := syscall.Setresuid(int(r.UID), int(r.UID), int(r.UID)); err != nil {
		return fmt.Errorf("setuid %d: %w", r.UID, err)
	}
	// A change of credentials clears the parent-death signal the node agent asked for
	// (SIGKILL: a container does not outlive the agent); ask again.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("pdeathsig: %w", err)
	}
	if os.Getppid() == 1 {
		return fmt.Errorf("the node agent is gone")
	}
	if r.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	return nil
}
