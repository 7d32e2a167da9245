package node

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"aether-edge/conformance/internal/podexec"
)

// launch is what runOnce starts: argv with env and mounts, through container-exec,
// from an image's root file system when root is set, else as a host program.
type launch struct {
	argv    []string
	env     []envVar
	mounts  []podexec.Mount
	workdir string
	root    *podexec.Root
	image   *OCIImage
}

// imageFor is the OCI image given for a pod's image reference, if any.
func (a *Agent) imageFor(image string) *OCIImage {
	for _, img := range a.Images {
		if img.Matches(image) {
			return img
		}
	}
	return nil
}

// imageLaunch prepares a container run from an image (ociprocess.go has the rules);
// on error it also returns the waiting reason the kubelet would show.
func (pr *podRun) imageLaunch(pod *corev1.Pod, c corev1.Container, img *OCIImage, vols map[string]string) (launch, string, error) {
	a := pr.agent
	rootfs, err := img.Rootfs(filepath.Join(a.StateDir, "images"))
	if err != nil {
		return launch{}, "ErrImagePull", err
	}
	u, err := imageUser(img.Config.User, pod.Spec.SecurityContext, c.SecurityContext, readUserDB(rootfs))
	if err != nil {
		return launch{}, "CreateContainerConfigError", err
	}
	env, err := containerEnv(pod, c, imageEnv(img.Config), a.APIServerHost, a.APIServerPort, a.CS, pr.ctx)
	if err != nil {
		return launch{}, "CreateContainerConfigError", err
	}
	if _, ok := lookupEnv(env, "HOME"); !ok {
		env = append(env, envVar{"HOME", u.Home})
	}
	argv, err := imageArgv(img.Config, expandAll(c.Command, env), expandAll(c.Args, env))
	if err != nil {
		return launch{}, "CreateContainerConfigError", err
	}
	mounts, err := volumeMounts(c, vols)
	if err != nil {
		return launch{}, "CreateContainerConfigError", err
	}
	etc, err := pr.etcFiles(pod)
	if err != nil {
		return launch{}, "CreateContainerError", err
	}
	scratch := filepath.Join(pr.dir, "containers", c.Name)
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return launch{}, "CreateContainerError", err
	}
	sc := c.SecurityContext
	root := &podexec.Root{
		Rootfs: rootfs, Scratch: scratch, UID: u.UID, GID: u.GID, Groups: u.Groups,
		ReadOnly:   sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		NoNewPrivs: sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
	}
	return launch{argv: argv, env: env, mounts: append(etc, mounts...), workdir: imageWorkdir(img.Config, c), root: root, image: img}, "", nil
}

// readUserDB reads the image's /etc/passwd and /etc/group (missing ones are empty).
func readUserDB(rootfs string) userDB {
	read := func(p string) string {
		host, err := podexec.ResolveIn(rootfs, p, false)
		if err != nil {
			return ""
		}
		b, _ := os.ReadFile(host)
		return string(b)
	}
	return userDB{passwd: read("/etc/passwd"), group: read("/etc/group")}
}

// etcFiles are /etc/hosts, /etc/hostname and /etc/resolv.conf as the kubelet mounts
// them into each container: the node's hosts file for hostNetwork pods, else one naming
// the pod; the node's resolv.conf, or with a cluster DNS (--cluster-dns) the pod's own
// naming it (resolv.go). The node's own files are bound read-only.
func (pr *podRun) etcFiles(pod *corev1.Pod) ([]podexec.Mount, error) {
	dir := filepath.Join(pr.dir, "etc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	hostname := pod.Name
	hosts := filepath.Join(dir, "hosts")
	if pod.Spec.HostNetwork {
		hostname = pr.agent.NodeName
		hosts = "/etc/hosts"
	} else {
		content := fmt.Sprintf("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", pr.ip, pod.Name)
		if err := os.WriteFile(hosts, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		return nil, err
	}
	resolv := "/etc/resolv.conf"
	if rc, ok, err := pr.resolvConf(pod); err != nil {
		return nil, err
	} else if ok {
		resolv = rc
	}
	out := []podexec.Mount{{Source: filepath.Join(dir, "hostname"), Target: "/etc/hostname"}}
	for _, m := range []podexec.Mount{{Source: hosts, Target: "/etc/hosts", ReadOnly: pod.Spec.HostNetwork}, {Source: resolv, Target: "/etc/resolv.conf", ReadOnly: true}} {
		if _, err := os.Stat(m.Source); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}
