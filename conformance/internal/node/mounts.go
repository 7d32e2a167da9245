package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"aether-edge/conformance/internal/podexec"
)

// mounts turns volumeMounts into bind mounts for a host program; podexec makes missing
// targets inside the container's private mount namespace.
func (a *Agent) mounts(c corev1.Container, vols map[string]string) ([]podexec.Mount, error) {
	out, err := volumeMounts(c, vols)
	if err != nil {
		return nil, err
	}
	for _, m := range out {
		if err := a.ensureTopLevel(m.Target); err != nil {
			return nil, fmt.Errorf("volumeMount on %s: %w", m.Target, err)
		}
	}
	return out, nil
}

// volumeMounts are a container's volumeMounts as bind mounts of the materialized
// volumes (targets as the container sees them).
func volumeMounts(c corev1.Container, vols map[string]string) ([]podexec.Mount, error) {
	var out []podexec.Mount
	for _, vm := range c.VolumeMounts {
		src, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume", vm.Name)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, filepath.Clean("/"+vm.SubPath))
		}
		out = append(out, podexec.Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	return out, nil
}

// ensureTopLevel creates the top-level directory of a mount path when it does not
// exist (e.g. /config for /config/app), the one case podexec cannot make privately;
// it is recorded so teardown removes exactly what we made.
func (a *Agent) ensureTopLevel(target string) error {
	target = filepath.Clean(target)
	parts := strings.SplitN(strings.TrimPrefix(target, "/"), "/", 2)
	top := "/" + parts[0]
	if _, err := os.Lstat(top); err == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.Mkdir(top, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	a.created[top] = true
	f, err := os.OpenFile(filepath.Join(a.StateDir, "created-paths"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, top)
	return err
}

// RemoveCreatedPaths removes the mount targets we created, deepest first, if empty.
func (a *Agent) RemoveCreatedPaths() {
	a.init()
	a.mu.Lock()
	defer a.mu.Unlock()
	var paths []string
	for p := range a.created {
		paths = append(paths, p)
	}
	// Longest first: children before parents.
	for i := range paths {
		for j := i + 1; j < len(paths); j++ {
			if len(paths[j]) > len(paths[i]) {
				paths[i], paths[j] = paths[j], paths[i]
			}
		}
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Size() == 0 {
			_ = os.Remove(p)
		} else if err == nil && st.IsDir() {
			_ = syscall.Rmdir(p)
		}
	}
}
