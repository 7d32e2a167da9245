package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func mkLayer(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeBlob stores b in the layout and returns its descriptor.
func writeBlob(t *testing.T, layout, mediaType string, b []byte) ociDescriptor {
	t.Helper()
	sum := sha256.Sum256(b)
	d := ociDescriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
	dir := filepath.Join(layout, "blobs", "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:])), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mkLayout writes an OCI layout with one image tagged dev: two layers, the second
// removing a file of the first (whiteout) and trying to write through symlinks that
// point out of the root file system.
func mkLayout(t *testing.T) (layout string, img ociDescriptor) {
	t.Helper()
	layout = filepath.Join(t.TempDir(), "layout")
	l1 := writeBlob(t, layout, mediaTypeLayerGzip, mkLayer(t, []tarEntry{
		{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/aether-edge", body: "#!binary", mode: 0o755},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n", mode: 0o644},
		{name: "etc/old.conf", body: "gone in layer 2", mode: 0o644},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "bin", typ: tar.TypeSymlink, link: "usr/local/bin"},
		{name: "up", typ: tar.TypeSymlink, link: "../../../../.."},
		{name: "abs", typ: tar.TypeSymlink, link: "/"},
	}))
	l2 := writeBlob(t, layout, "application/vnd.oci.image.layer.v1.tar+gzip", mkLayer(t, []tarEntry{
		{name: "etc/.wh.old.conf"},
		{name: "up/escaped", body: "must stay inside", mode: 0o644},
		{name: "abs/etc/also", body: "inside too", mode: 0o644},
		{name: "usr/local/bin/hard", typ: tar.TypeLink, link: "usr/local/bin/aether-edge"},
	}))
	cfg := writeBlob(t, layout, mediaTypeConfig, mustJSON(t, map[string]any{
		"os": "linux", "architecture": "amd64",
		"config": ImageConfig{User: "65532:65532", Entrypoint: []string{"/usr/local/bin/aether-edge"}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
	}))
	img = writeBlob(t, layout, mediaTypeManifest, mustJSON(t, ociManifest{SchemaVersion: 2, MediaType: mediaTypeManifest, Config: cfg, Layers: []ociDescriptor{l1, l2}}))
	img.Annotations = map[string]string{refNameAnnotation: "dev"}
	if err := os.WriteFile(filepath.Join(layout, "index.json"), mustJSON(t, ociIndex{SchemaVersion: 2, Manifests: []ociDescriptor{img}}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return layout, img
}

func TestOpenImageAndUnpack(t *testing.T) {
	layout, desc := mkLayout(t)
	img, err := OpenImage("aether-edge:dev", layout)
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != desc.Digest {
		t.Errorf("digest %s, want %s", img.Digest, desc.Digest)
	}
	if img.Config.User != "65532:65532" || strings.Join(img.Config.Entrypoint, " ") != "/usr/local/bin/aether-edge" {
		t.Errorf("config %+v", img.Config)
	}
	cache := filepath.Join(t.TempDir(), "images")
	rootfs, err := img.Rootfs(cache)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, strings.TrimPrefix(desc.Digest, "sha256:"), "rootfs"); rootfs != want {
		t.Errorf("rootfs %s, want %s (cached by manifest digest)", rootfs, want)
	}
	st, err := os.Stat(filepath.Join(rootfs, "usr/local/bin/aether-edge"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("binary: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(rootfs, "tmp")); err != nil || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp is not sticky: %v %v", st, err)
	}
	if _, err := os.Lstat(filepath.Join(rootfs, "etc/old.conf")); !os.IsNotExist(err) {
		t.Errorf("whiteout did not remove etc/old.conf: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "escaped")); err != nil || string(b) != "must stay inside" {
		t.Errorf("up/escaped should land at <rootfs>/escaped: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "etc/also")); err != nil {
		t.Errorf("abs/etc/also should land at <rootfs>/etc/also: %v", err)
	}
	a, _ := os.Stat(filepath.Join(rootfs, "usr/local/bin/aether-edge"))
	h, err := os.Stat(filepath.Join(rootfs, "usr/local/bin/hard"))
	if err != nil || !os.SameFile(a, h) {
		t.Errorf("hard link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(layout), "escaped")); !os.IsNotExist(err) {
		t.Errorf("a layer wrote outside the root file system")
	}
	// A second agent (or restart) reuses the finished unpack.
	again, _ := OpenImage("aether-edge:dev", layout)
	if r2, err := again.Rootfs(cache); err != nil || r2 != rootfs {
		t.Errorf("cached unpack: %s %v", r2, err)
	}
}

func TestOpenImageErrors(t *testing.T) {
	layout, desc := mkLayout(t)
	if _, err := OpenImage("aether-edge:v2", layout); err == nil || !strings.Contains(err.Error(), `no manifest tagged "v2" (tags: dev)`) {
		t.Errorf("wrong tag: %v", err)
	}
	if _, err := OpenImage("aether-edge@sha256:"+strings.Repeat("0", 64), layout); err == nil {
		t.Errorf("digest reference accepted")
	}
	if _, err := OpenImage("aether-edge:dev", t.TempDir()); err == nil {
		t.Errorf("a directory without index.json accepted")
	}
	// A manifest whose bytes do not match its digest.
	p, _ := blobPath(layout, desc)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenImage("aether-edge:dev", layout); err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Errorf("tampered manifest: %v", err)
	}
}

func TestUnpackChecksLayerDigest(t *testing.T) {
	layout, _ := mkLayout(t)
	img, err := OpenImage("aether-edge:dev", layout)
	if err != nil {
		t.Fatal(err)
	}
	// Replace the first layer's content by another valid layer.
	p, _ := blobPath(layout, img.manifest.Layers[0])
	if err := os.WriteFile(p, mkLayer(t, []tarEntry{{name: "other", body: "x", mode: 0o644}}), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if _, err := img.Rootfs(cache); err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Errorf("tampered layer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, strings.TrimPrefix(img.Digest, "sha256:"), ".done")); !os.IsNotExist(err) {
		t.Errorf("a failed unpack was stamped done")
	}
}

func TestImageMatchesAndFlag(t *testing.T) {
	img := &OCIImage{Ref: "aether-edge:dev"}
	for ref, want := range map[string]bool{
		"aether-edge:dev": true, "localhost:5000/aether-edge:dev": true,
		"aether-edge:v2": false, "aether-edge": false, "other/aether-edge:dev": false, "envoyproxy/envoy:v1.40.0": false,
	} {
		if got := img.Matches(ref); got != want {
			t.Errorf("Matches(%q) = %v, want %v", ref, got, want)
		}
	}
	if ref, dir, err := ParseImageFlag("aether-edge:dev=target/image/aether-edge"); err != nil || ref != "aether-edge:dev" || dir != "target/image/aether-edge" {
		t.Errorf("ParseImageFlag: %q %q %v", ref, dir, err)
	}
	for _, bad := range []string{"aether-edge:dev", "=dir", "ref="} {
		if _, _, err := ParseImageFlag(bad); err == nil {
			t.Errorf("ParseImageFlag(%q) accepted", bad)
		}
	}
}
