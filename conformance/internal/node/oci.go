package node

// OCI image layouts: an image the node runs from its own root file system rather than
// a host program standing in for it (`nodeagent run --oci-image REF=DIR`).
//
//	DIR/index.json ─ manifest tagged REF's tag (annotation org.opencontainers.image.ref.name)
//	  └─ blobs/sha256/<manifest> ─ config (Entrypoint, Cmd, Env, User, WorkingDir)
//	                             └─ layers (tar, tar+gzip), applied in order
//	                                    → <state>/images/<manifest hex>/rootfs (once)
//
// Every blob is checked against its digest and size before it is used.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

const (
	mediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	mediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	refNameAnnotation  = "org.opencontainers.image.ref.name"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType,omitempty"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType,omitempty"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

// ImageConfig is the part of an OCI image configuration that says how to run it.
type ImageConfig struct {
	User       string   `json:"User,omitempty"`
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type ociConfig struct {
	OS           string      `json:"os"`
	Architecture string      `json:"architecture"`
	Config       ImageConfig `json:"config"`
}

// OCIImage is one image of a layout, resolved to its manifest.
type OCIImage struct {
	Ref      string // as pods name it, e.g. aether-edge:dev
	Layout   string // the layout directory
	Digest   string // of the manifest, sha256:…
	Config   ImageConfig
	manifest ociManifest

	once   sync.Once
	rootfs string
	err    error
}

// ParseImageFlag splits `REF=DIR` (the --oci-image flag).
func ParseImageFlag(v string) (ref, dir string, err error) {
	ref, dir, ok := strings.Cut(v, "=")
	if !ok || ref == "" || dir == "" {
		return "", "", fmt.Errorf("--oci-image %q: want IMAGE=LAYOUT-DIR (e.g. aether-edge:dev=target/image/aether-edge)", v)
	}
	return ref, dir, nil
}

// imageTag is the tag of an image reference ("latest" when it has none; a digest
// reference has no tag and yields "").
func imageTag(ref string) string {
	if strings.Contains(ref, "@") {
		return ""
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return "latest"
}

// OpenImage reads the manifest tagged with ref's tag from the layout dir and its config.
func OpenImage(ref, dir string) (*OCIImage, error) {
	tag := imageTag(ref)
	if tag == "" {
		return nil, fmt.Errorf("image %q: a layout is looked up by tag, not by digest", ref)
	}
	var idx ociIndex
	if err := readJSON(filepath.Join(dir, "index.json"), &idx); err != nil {
		return nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	if idx.SchemaVersion != 2 {
		return nil, fmt.Errorf("layout %s: index.json schemaVersion %d, want 2", dir, idx.SchemaVersion)
	}
	var desc *ociDescriptor
	var tags []string
	for i, m := range idx.Manifests {
		name := m.Annotations[refNameAnnotation]
		tags = append(tags, name)
		if name == tag {
			desc = &idx.Manifests[i]
		}
	}
	if desc == nil {
		return nil, fmt.Errorf("layout %s: no manifest tagged %q (tags: %s)", dir, tag, strings.Join(tags, ", "))
	}
	if desc.MediaType != mediaTypeManifest {
		return nil, fmt.Errorf("layout %s: %s is a %s, want an image manifest", dir, desc.Digest, desc.MediaType)
	}
	img := &OCIImage{Ref: ref, Layout: dir, Digest: desc.Digest}
	if err := readBlobJSON(dir, *desc, &img.manifest); err != nil {
		return nil, err
	}
	if img.manifest.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest %s: schemaVersion %d, want 2", desc.Digest, img.manifest.SchemaVersion)
	}
	if mt := img.manifest.Config.MediaType; mt != mediaTypeConfig {
		return nil, fmt.Errorf("manifest %s: config media type %q, want %s", desc.Digest, mt, mediaTypeConfig)
	}
	var cfg ociConfig
	if err := readBlobJSON(dir, img.manifest.Config, &cfg); err != nil {
		return nil, err
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, fmt.Errorf("image %s is for %s, not linux", ref, cfg.OS)
	}
	for _, l := range img.manifest.Layers {
		if l.MediaType != mediaTypeLayer && l.MediaType != mediaTypeLayerGzip {
			return nil, fmt.Errorf("manifest %s: layer %s has media type %q (only tar and tar+gzip here)", desc.Digest, l.Digest, l.MediaType)
		}
	}
	img.Config = cfg.Config
	return img, nil
}

// Matches says whether a pod's image reference names this image: same repository
// (registry ignored, as for the program map) and same tag.
func (img *OCIImage) Matches(image string) bool {
	return imageRepository(image) == imageRepository(img.Ref) && imageTag(image) == imageTag(img.Ref)
}

// Rootfs unpacks the image once under cacheDir/<manifest hex>/rootfs and returns that
// directory; a finished unpack (its .done stamp) is reused.
func (img *OCIImage) Rootfs(cacheDir string) (string, error) {
	img.once.Do(func() {
		dir := filepath.Join(cacheDir, strings.TrimPrefix(img.Digest, "sha256:"))
		rootfs := filepath.Join(dir, "rootfs")
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			img.rootfs = rootfs
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			img.err = err
			return
		}
		if err := os.MkdirAll(rootfs, 0o755); err != nil {
			img.err = err
			return
		}
		for _, l := range img.manifest.Layers {
			if err := img.applyLayer(rootfs, l); err != nil {
				img.err = fmt.Errorf("image %s: layer %s: %w", img.Ref, l.Digest, err)
				return
			}
		}
		if err := os.WriteFile(filepath.Join(dir, ".done"), []byte(img.Digest+"\n"), 0o644); err != nil {
			img.err = err
			return
		}
		img.rootfs = rootfs
	})
	return img.rootfs, img.err
}

func (img *OCIImage) applyLayer(rootfs string, l ociDescriptor) error {
	f, err := openBlob(img.Layout, l)
	if err != nil {
		return err
	}
	defer f.Close()
	v := &verifier{r: f, h: sha256.New(), want: l}
	if err := applyTar(rootfs, v, l.MediaType == mediaTypeLayerGzip); err != nil {
		return err
	}
	// The rest of the blob (tar padding) counts for the digest too.
	if _, err := io.Copy(io.Discard, v); err != nil {
		return err
	}
	return v.check()
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

func blobPath(layout string, d ociDescriptor) (string, error) {
	algo, hexd, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" || len(hexd) != 64 {
		return "", fmt.Errorf("digest %q: only sha256 digests here", d.Digest)
	}
	if _, err := hex.DecodeString(hexd); err != nil {
		return "", fmt.Errorf("digest %q: %w", d.Digest, err)
	}
	return filepath.Join(layout, "blobs", algo, hexd), nil
}

func openBlob(layout string, d ociDescriptor) (*os.File, error) {
	p, err := blobPath(layout, d)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// readBlobJSON reads a small blob, checks its digest and size, and decodes it.
func readBlobJSON(layout string, d ociDescriptor, v any) error {
	p, err := blobPath(layout, d)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest || int64(len(b)) != d.Size {
		return fmt.Errorf("blob %s: content has digest %s and size %d, descriptor says size %d", d.Digest, got, len(b), d.Size)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	return nil
}

// verifier hashes what is read through it.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	want ociDescriptor
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	return n, err
}

func (v *verifier) check() error {
	if got := "sha256:" + hex.EncodeToString(v.h.Sum(nil)); got != v.want.Digest || v.n != v.want.Size {
		return fmt.Errorf("content has digest %s and size %d, descriptor says size %d", got, v.n, v.want.Size)
	}
	return nil
}
