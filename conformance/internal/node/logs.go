package node

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Container logs are kept like the kubelet's CRI log files: one line per output line,
// "<RFC3339Nano time> <stdout|stderr> <text>", so the log endpoint can honour sinceTime,
// tailLines and timestamps (the suite's mirror tests read logs with sinceTime).

// logWriter copies a process's output into a log file, line by line, with timestamps.
type logWriter struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*logWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logWriter{f: f}, nil
}

func (w *logWriter) copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			line = strings.TrimSuffix(line, "\n")
			w.mu.Lock()
			fmt.Fprintf(w.f, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, line)
			w.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (w *logWriter) Close() error { return w.f.Close() }

// logLookup finds the log file of a container; ok is false if there is none.
type logLookup func(namespace, pod, container string) (path string, ok bool)

// ServeLogs runs the kubelet-style HTTPS endpoint the API server calls for pods/log:
// GET /containerLogs/{namespace}/{pod}/{container}?follow&sinceTime&sinceSeconds&tailLines&timestamps&limitBytes.
// The serving certificate is self-signed; the API server runs without
// --kubelet-certificate-authority, so it does not verify it.
func ServeLogs(ctx context.Context, addr string, lookup logLookup) error {
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/containerLogs/", func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		if len(parts) != 3 {
			http.Error(w, "want /containerLogs/{namespace}/{pod}/{container}", http.StatusBadRequest)
			return
		}
		path, ok := lookup(parts[0], parts[1], parts[2])
		if ok && r.URL.Query().Get("previous") == "true" {
			path += ".previous"
			if _, err := os.Stat(path); err != nil {
				http.Error(w, fmt.Sprintf("previous terminated container %q in pod %s/%s not found", parts[2], parts[0], parts[1]), http.StatusBadRequest)
				return
			}
		}
		if !ok {
			http.Error(w, fmt.Sprintf("container %q in pod %s/%s not found", parts[2], parts[0], parts[1]), http.StatusNotFound)
			return
		}
		if err := writeLogs(r.Context(), w, path, r.URL.Query()); err != nil {
			log.Printf("logs %s: %v", r.URL.Path, err)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{
		Addr:      addr,
		Handler:   mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	err = srv.ServeTLS(ln, "", "")
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

type logQuery struct {
	follow, timestamps bool
	since              time.Time
	tail               int // -1: all
	limit              int64
}

func parseLogQuery(q map[string][]string) logQuery {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lq := logQuery{follow: get("follow") == "true", timestamps: get("timestamps") == "true", tail: -1}
	if v := get("sinceTime"); v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			lq.since = t
		}
	}
	if v := get("sinceSeconds"); v != "" {
		if s, err := strconv.Atoi(v); err == nil {
			lq.since = time.Now().Add(-time.Duration(s) * time.Second)
		}
	}
	if v := get("tailLines"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			lq.tail = n
		}
	}
	if v := get("limitBytes"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			lq.limit = n
		}
	}
	return lq
}

// renderLine turns a stored line into what the client sees, or "" to drop it.
func (lq logQuery) renderLine(stored string) (string, bool) {
	ts, rest, ok := strings.Cut(stored, " ")
	if !ok {
		return "", false
	}
	_, text, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "", false
	}
	if !lq.since.IsZero() && t.Before(lq.since) {
		return "", false
	}
	if lq.timestamps {
		return ts + " " + text + "\n", true
	}
	return text + "\n", true
}

func writeLogs(ctx context.Context, w http.ResponseWriter, path string, q map[string][]string) error {
	lq := parseLogQuery(q)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	var lines []string
	br := bufio.NewReader(f)
	pending := ""
	for {
		s, err := br.ReadString('\n')
		if err != nil {
			pending = s
			break
		}
		if out, ok := lq.renderLine(strings.TrimSuffix(s, "\n")); ok {
			lines = append(lines, out)
		}
	}
	if lq.tail >= 0 && len(lines) > lq.tail {
		lines = lines[len(lines)-lq.tail:]
	}
	var written int64
	for _, l := range lines {
		if lq.limit > 0 && written+int64(len(l)) > lq.limit {
			_, err := io.WriteString(w, l[:lq.limit-written])
			return err
		}
		n, err := io.WriteString(w, l)
		written += int64(n)
		if err != nil {
			return err
		}
	}
	if !lq.follow {
		return nil
	}
	flusher, _ := w.(http.Flusher)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		s, err := br.ReadString('\n')
		pending += s
		if err == nil {
			if out, ok := lq.renderLine(strings.TrimSuffix(pending, "\n")); ok {
				if _, err := io.WriteString(w, out); err != nil {
					return err
				}
			}
			pending = ""
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "aether-edge-conformance-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
