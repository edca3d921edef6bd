// h2server: a third-party server, echo (github.com/labstack/echo/v4), answering the
// same routes four ways at once: HTTP/1.1, HTTP/2 cleartext (h2c, echo's
// StartH2CServer: golang.org/x/net/http2), HTTP/2 over TLS served by
// golang.org/x/net/http2 (http2.ConfigureServer) and HTTP/2 over TLS served by
// net/http's own bundled copy. Clients in the same program (net/http for HTTP/1.1 and
// bundled HTTP/2, x/net's http2.Transport for h2c and x/net TLS) make known requests,
// check each status and protocol, and the program prints the truth as `key=value`
// lines: METHOD_path_STATUS=N per request kind over all protocols, the same per
// protocol as PROTO:METHOD_path_STATUS=N, and requests=N. A middleware counts what the
// server itself answered; the program fails if it disagrees with the clients.
//
//	h2server N     N rounds of: GET /hello (200), GET /missing (404), POST /items (201),
//	               GET /fail (500), GET /empty (200: the handler writes nothing),
//	               GET /teapot (418: written by a handler that then writes a body)
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/http2"
)

func main() {
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil || rounds < 0 {
		fmt.Fprintln(os.Stderr, "usage: h2server N")
		os.Exit(2)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	var mu sync.Mutex
	served := map[string]int{}
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			mu.Lock()
			served[fmt.Sprintf("%s_%s_%d", c.Request().Method, strings.TrimPrefix(c.Path(), "/"), c.Response().Status)]++
			mu.Unlock()
			return nil
		}
	})
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	e.GET("/missing", func(c echo.Context) error { return c.NoContent(http.StatusNotFound) })
	e.POST("/items", func(c echo.Context) error {
		io.Copy(io.Discard, c.Request().Body)
		return c.NoContent(http.StatusCreated)
	})
	e.GET("/fail", func(c echo.Context) error { return echo.NewHTTPError(http.StatusInternalServerError, "failed") })
	e.GET("/empty", func(c echo.Context) error { return nil })
	e.GET("/teapot", func(c echo.Context) error { return c.String(http.StatusTeapot, "short and stout\n") })

	// HTTP/1.1 and h2c on one listener: echo's h2c handler serves both.
	plain := listen()
	e.Listener = plain
	go e.StartH2CServer("", &http2.Server{})

	cert := selfSigned()
	// HTTP/2 over TLS by golang.org/x/net/http2.
	xnet := &http.Server{Handler: e, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	if err := http2.ConfigureServer(xnet, &http2.Server{}); err != nil {
		fail("ConfigureServer: %v", err)
	}
	xnetLn := listen()
	go xnet.ServeTLS(xnetLn, "", "")
	// HTTP/2 over TLS by net/http's bundled copy.
	bundled := &http.Server{Handler: e, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	bundledLn := listen()
	go bundled.ServeTLS(bundledLn, "", "")

	insecure := &tls.Config{InsecureSkipVerify: true}
	clients := []struct {
		proto  string
		base   string
		client *http.Client
		major  int
	}{
		{"http1", "http://" + plain.Addr().String(), &http.Client{Transport: &http.Transport{}}, 1},
		{"h2c", "http://" + plain.Addr().String(), &http.Client{Transport: &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}}, 2},
		{"h2-xnet", "https://" + xnetLn.Addr().String(), &http.Client{Transport: &http2.Transport{TLSClientConfig: insecure}}, 2},
		{"h2-bundled", "https://" + bundledLn.Addr().String(), &http.Client{Transport: &http.Transport{
			TLSClientConfig: insecure, ForceAttemptHTTP2: true,
		}}, 2},
	}
	truth := map[string]int{}
	for _, c := range clients {
		c.client.Timeout = 10 * time.Second
		do := func(method, path string, want int) {
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("item")
			}
			req, err := http.NewRequest(method, c.base+path, body)
			if err != nil {
				fail("request: %v", err)
			}
			resp, err := c.client.Do(req)
			if err != nil {
				fail("%s %s %s: %v", c.proto, method, path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || resp.ProtoMajor != c.major {
				fail("%s %s %s: %s %d, want HTTP/%d %d", c.proto, method, path, resp.Proto, resp.StatusCode, c.major, want)
			}
			key := fmt.Sprintf("%s_%s_%d", method, strings.TrimPrefix(path, "/"), want)
			truth[key]++
			truth[c.proto+":"+key]++
		}
		for i := 0; i < rounds; i++ {
			do("GET", "/hello", 200)
			do("GET", "/missing", 404)
			do("POST", "/items", 201)
			do("GET", "/fail", 500)
			do("GET", "/empty", 200)
			do("GET", "/teapot", 418)
		}
	}
	xnet.Close()
	bundled.Close()
	e.Close()

	total := 0
	keys := make([]string, 0, len(truth))
	for k, v := range truth {
		keys = append(keys, k)
		if !strings.Contains(k, ":") {
			total += v
			mu.Lock()
			if served[k] != v {
				fail("the server counted %s=%d, the clients %d", k, served[k], v)
			}
			mu.Unlock()
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d\n", k, truth[k])
	}
	fmt.Printf("requests=%d\n", total)
}

func listen() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	return ln
}

// selfSigned makes a certificate for 127.0.0.1, valid for an hour.
func selfSigned() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		fail("certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "h2server: "+format+"\n", args...)
	os.Exit(1)
}
