// Command echo-basic-v2 stands for the suite's backend image
// registry.k8s.io/gateway-api/conformance/echo-basic:v0.2.0 (gateway-api-conformance-images,
// whose source the Go module proxy does not serve). It does, itself, what v0.2.0 adds
// over the echo-basic of the v1.6.x conformance module, and hands everything else to
// that echo-basic (the `echo-basic` on PATH, which the node agent links there), which
// behaves as the v0.1.0 image does:
//
//   - UDP_ECHO_SERVER: the UDP echo on UDP_PORT (default 8080). Every datagram is
//     answered, to its sender, with one JSON object
//     {"request": <the datagram as a string>, "namespace": $NAMESPACE,
//     "ingress": $INGRESS_NAME, "service": $SERVICE_NAME, "pod": $POD_NAME}
//     (the suite's utils/udp and UDPRouteWeightedRouting decode it and read service,
//     namespace and pod). The same port also serves TCP, so one backend Service can
//     stand behind a Gateway's UDP and TCP listeners of the same port number: each line
//     a client sends is answered with the same JSON object (request: the line) and "\n".
//   - TCP_ECHO_SERVER with TCP_MODE=RESET: every connection to TCP_PORT (default 3000),
//     and to TLS_PORT (default 8443) when TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY are
//     set, is accepted and reset at once (RST, SO_LINGER 0), for tests of a backend that
//     fails connections.
//
// Written from the protocol as the suite's tests use it and as the image's documentation
// describes it; see conformance/README.md, "v1.7.0".
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// envelope is the UDP echo's answer. Field order is the image's.
type envelope struct {
	Request   string `json:"request"`
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	switch {
	case os.Getenv("UDP_ECHO_SERVER") != "":
		port := envOr("UDP_PORT", "8080")
		log.Fatal(serveUDPEcho(":"+port, podEnvelope()))
	case os.Getenv("TCP_ECHO_SERVER") != "" && strings.EqualFold(os.Getenv("TCP_MODE"), "RESET"):
		ports := []string{envOr("TCP_PORT", "3000")}
		if os.Getenv("TLS_SERVER_CERT") != "" && os.Getenv("TLS_SERVER_PRIV_KEY") != "" {
			ports = append(ports, envOr("TLS_PORT", "8443"))
		}
		errs := make(chan error, len(ports))
		for _, p := range ports {
			go func(p string) { errs <- serveReset(":" + p) }(p)
		}
		log.Fatal(<-errs)
	default:
		execEchoBasic()
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func podEnvelope() envelope {
	return envelope{
		Namespace: os.Getenv("NAMESPACE"),
		Ingress:   os.Getenv("INGRESS_NAME"),
		Service:   os.Getenv("SERVICE_NAME"),
		Pod:       os.Getenv("POD_NAME"),
	}
}

// answer is the JSON object for one request.
func answer(ctx envelope, request string) []byte {
	ctx.Request = request
	b, err := json.Marshal(ctx)
	if err != nil { // strings only: cannot happen
		panic(err)
	}
	return b
}

// serveUDPEcho serves the UDP echo and its TCP twin on the same address.
func serveUDPEcho(addr string, ctx envelope) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("UDP echo on %s/udp and %s/tcp (service %q, namespace %q, pod %q)", addr, addr, ctx.Service, ctx.Namespace, ctx.Pod)
	errs := make(chan error, 2)
	go func() { errs <- udpLoop(pc, ctx) }()
	go func() { errs <- tcpLoop(ln, ctx) }()
	return <-errs
}

func udpLoop(pc net.PacketConn, ctx envelope) error {
	buf := make([]byte, 64*1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		log.Printf("udp %d bytes from %s", n, from)
		if _, err := pc.WriteTo(answer(ctx, string(buf[:n])), from); err != nil {
			log.Printf("udp reply to %s: %v", from, err)
		}
	}
}

func tcpLoop(ln net.Listener, ctx envelope) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			log.Printf("tcp connection from %s", c.RemoteAddr())
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if line != "" {
					if _, werr := c.Write(append(answer(ctx, line), '\n')); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// serveReset accepts connections and resets each at once.
func serveReset(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("TCP_MODE=RESET on %s: every connection is reset", addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		log.Printf("reset connection from %s", c.RemoteAddr())
		_ = c.Close()
	}
}

// execEchoBasic replaces this process with the v1.6.x echo-basic (same argv and env).
func execEchoBasic() {
	path := os.Getenv("ECHO_BASIC_BIN")
	if path == "" {
		p, err := exec.LookPath("echo-basic")
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo-basic-v2: no echo-basic on PATH (and ECHO_BASIC_BIN unset) for this mode")
			os.Exit(1)
		}
		path = p
	}
	err := syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "echo-basic-v2: exec %s: %v\n", path, err)
	os.Exit(1)
}
