package node

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImageArgv(t *testing.T) {
	cfg := ImageConfig{Entrypoint: []string{"/usr/local/bin/aether-edge"}, Cmd: []string{"--help"}}
	cases := []struct {
		name          string
		cfg           ImageConfig
		command, args []string
		want          []string
	}{
		{"image alone: Entrypoint + Cmd", cfg, nil, nil, []string{"/usr/local/bin/aether-edge", "--help"}},
		{"args replace Cmd", cfg, nil, []string{"agent", "--node-name=n"}, []string{"/usr/local/bin/aether-edge", "agent", "--node-name=n"}},
		{"command replaces Entrypoint and drops Cmd", cfg, []string{"/bin/sh", "-c"}, nil, []string{"/bin/sh", "-c"}},
		{"command + args", cfg, []string{"aether-edge"}, []string{"bootstrap"}, []string{"aether-edge", "bootstrap"}},
		{"Cmd only", ImageConfig{Cmd: []string{"/coredns"}}, nil, nil, []string{"/coredns"}},
	}
	for _, c := range cases {
		got, err := imageArgv(c.cfg, c.command, c.args)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := imageArgv(ImageConfig{Cmd: []string{"x"}}, nil, []string{"only-args"}); err != nil {
		// Kubernetes: args with no Entrypoint run the args themselves.
		t.Errorf("args without Entrypoint: %v", err)
	}
	if _, err := imageArgv(ImageConfig{}, nil, nil); err == nil {
		t.Errorf("no Entrypoint, Cmd or command: accepted")
	}
	// The image's slices are not shared with the result.
	got, _ := imageArgv(cfg, nil, []string{"a"})
	got[0] = "changed"
	if cfg.Entrypoint[0] != "/usr/local/bin/aether-edge" {
		t.Errorf("imageArgv aliases the image's Entrypoint")
	}
}

func i64(v int64) *int64 { return &v }
func yes() *bool         { b := true; return &b }

var testDB = userDB{
	passwd: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\napp:x:1000:1001::/srv/app:/bin/sh\n",
	group:  "root:x:0:\nnonroot:x:65532:\napp:x:1001:\nextra:x:2000:app,other\n",
}

func TestImageUser(t *testing.T) {
	deployPod := &corev1.PodSecurityContext{RunAsNonRoot: yes(), RunAsUser: i64(65532), RunAsGroup: i64(65532), FSGroup: i64(65532)}
	cases := []struct {
		name  string
		image string
		pod   *corev1.PodSecurityContext
		ctr   *corev1.SecurityContext
		want  processUser
	}{
		{"image user uid:gid", "65532:65532", nil, nil, processUser{65532, 65532, []uint32{65532}, "/home/nonroot"}},
		{"deploy/: pod securityContext with fsGroup", "65532:65532", deployPod, nil, processUser{65532, 65532, []uint32{65532}, "/home/nonroot"}},
		{"no user anywhere: root", "", nil, nil, processUser{0, 0, []uint32{0}, "/root"}},
		{"image user by name", "nonroot", nil, nil, processUser{65532, 65532, []uint32{65532}, "/home/nonroot"}},
		{"image uid only: group from passwd, groups from /etc/group", "1000", nil, nil, processUser{1000, 1001, []uint32{1001, 2000}, "/srv/app"}},
		{"name:group", "app:extra", nil, nil, processUser{1000, 2000, []uint32{2000}, "/srv/app"}},
		{"container runAsUser over pod and image", "65532:65532", deployPod, &corev1.SecurityContext{RunAsUser: i64(1000)},
			processUser{1000, 65532, []uint32{2000, 65532}, "/srv/app"}},
		{"runAsUser without any group: passwd group of that uid", "65532:65532", &corev1.PodSecurityContext{RunAsUser: i64(1000)}, nil,
			processUser{1000, 1001, []uint32{1001, 2000}, "/srv/app"}},
		{"runAsUser unknown to the image, no group: gid 0", "65532:65532", &corev1.PodSecurityContext{RunAsUser: i64(4242)}, nil,
			processUser{4242, 0, []uint32{0}, "/"}},
		{"runAsGroup alone keeps the image's uid", "65532:65532", nil, &corev1.SecurityContext{RunAsGroup: i64(7)}, processUser{65532, 7, []uint32{7}, "/home/nonroot"}},
		{"fsGroup and supplementalGroups", "65532:65532", &corev1.PodSecurityContext{FSGroup: i64(3000), SupplementalGroups: []int64{5, 3000}}, nil,
			processUser{65532, 65532, []uint32{5, 3000, 65532}, "/home/nonroot"}},
	}
	for _, c := range cases {
		got, err := imageUser(c.image, c.pod, c.ctr, testDB)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	errs := []struct {
		name, image, want string
		pod               *corev1.PodSecurityContext
		ctr               *corev1.SecurityContext
	}{
		{"runAsNonRoot, image runs as root", "", "runAsNonRoot and image will run as root", &corev1.PodSecurityContext{RunAsNonRoot: yes()}, nil},
		{"runAsNonRoot on the container, runAsUser 0", "65532", "runAsNonRoot", nil, &corev1.SecurityContext{RunAsNonRoot: yes(), RunAsUser: i64(0)}},
		{"runAsNonRoot, non-numeric image user", "nonroot", "cannot verify user is non-root", &corev1.PodSecurityContext{RunAsNonRoot: yes()}, nil},
		{"unknown user name", "nobody-here", "no such user", nil, nil},
		{"unknown group name", "65532:nogroup", "no such group", nil, nil},
	}
	for _, c := range errs {
		if _, err := imageUser(c.image, c.pod, c.ctr, testDB); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestImageEnvAndWorkdir(t *testing.T) {
	cfg := ImageConfig{Env: []string{"PATH=/usr/local/bin:/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "LEVEL=info", "EMPTY"}, WorkingDir: "/srv"}
	pod := &corev1.Pod{}
	pod.Name = "aether-edge-x"
	c := corev1.Container{Env: []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}, {Name: "ARG", Value: "$(LEVEL)-$(PATH)"}}}
	env, err := containerEnv(pod, c, imageEnv(cfg), "10.244.0.1", "6443", nil, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range envList(env) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"PATH": "/usr/local/bin:/usr/bin", "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "LEVEL": "debug", "EMPTY": "",
		"ARG": "debug-/usr/local/bin:/usr/bin", "HOSTNAME": "aether-edge-x",
		"KUBERNETES_SERVICE_HOST": "10.244.0.1", "KUBERNETES_SERVICE_PORT": "6443", "KUBERNETES_SERVICE_PORT_HTTPS": "6443",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env:\n got %v\nwant %v", got, want)
	}
	if w := imageWorkdir(cfg, corev1.Container{}); w != "/srv" {
		t.Errorf("workdir %q, want the image's /srv", w)
	}
	if w := imageWorkdir(cfg, corev1.Container{WorkingDir: "/data"}); w != "/data" {
		t.Errorf("workdir %q, want the container's /data", w)
	}
	if w := imageWorkdir(ImageConfig{}, corev1.Container{}); w != "/" {
		t.Errorf("workdir %q, want /", w)
	}
}
