package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

var ctx = envelope{Namespace: "gateway-conformance-infra", Service: "udp-echo", Pod: "udp-echo-abc-def"}

func TestUDPEcho(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go udpLoop(pc, ctx)
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("gateway-api-conformance-udp-echo")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	// What the suite reads (utils/udp, UDPRouteWeightedRouting).
	var got map[string]string
	if err := json.Unmarshal(buf[:n], &got); err != nil {
		t.Fatalf("%q: %v", buf[:n], err)
	}
	want := map[string]string{"request": "gateway-api-conformance-udp-echo", "namespace": ctx.Namespace, "ingress": "", "service": ctx.Service, "pod": ctx.Pod}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want exactly %v", got, want)
	}
}

func TestTCPTwinAnswersEachLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go tcpLoop(ln, ctx)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	for _, line := range []string{"one\n", "two\n"} {
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		resp, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var e envelope
		if err := json.Unmarshal([]byte(resp), &e); err != nil {
			t.Fatal(err)
		}
		if e.Request != line || e.Pod != ctx.Pod || e.Service != ctx.Service {
			t.Errorf("answer to %q: %+v", line, e)
		}
	}
}

func TestResetMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go serveReset(addr)
	var c net.Conn
	for i := 0; i < 50; i++ {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want connection reset", err)
	}
}
