// httpserver: a net/http server on 127.0.0.1 (a port the kernel picks) driven by a real
// net/http client in the same program, for the stdlib `http` library's end-to-end test.
// Every request is made, and its status checked, before the program prints its own
// truth as `key=value` lines and exits.
//
//	httpserver N [h2] [slow=MS] [overlap]
//	                 N rounds (h2: over TLS, HTTP/2 served by net/http's bundled copy,
//	                 the client checks each response is HTTP/2); each round makes
//	                 GET /hello 3 times       -> 200
//	                 GET /missing 1 time      -> 404 (explicit WriteHeader)
//	                 POST /items 2 times      -> 201
//	                 GET /fail 1 time         -> 500 (http.Error)
//	                 GET /implicit 1 time     -> 200 (no WriteHeader: Write implies it)
//	                 GET /empty 1 time        -> 200 (the handler writes nothing)
//	                 and finally GET /slow once (sleeps 150ms, or MS, 200);
//	                 overlap: GET /slow first, and the rounds while its handler sleeps
package main

import (
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
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	rounds := 1
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 || n > 1000 {
			fmt.Fprintln(os.Stderr, "usage: httpserver N (0..1000)")
			os.Exit(2)
		}
		rounds = n
	}
	h2, slowFor, overlap := false, 150*time.Millisecond, false
	for _, arg := range os.Args[2:] {
		if arg == "overlap" {
			overlap = true
			continue
		}
		isSlow := strings.HasPrefix(arg, "slow=")
		n, err := strconv.Atoi(strings.TrimPrefix(arg, "slow="))
		switch {
		case arg == "h2":
			h2 = true
		case isSlow && err == nil && n >= 0:
			slowFor = time.Duration(n) * time.Millisecond
		default:
			fmt.Fprintln(os.Stderr, "usage: httpserver N [h2] [slow=MS]")
			os.Exit(2)
		}
	}

	// Plain paths and a method check in the handler, not Go 1.22's "GET /path" patterns,
	// so that the program builds and behaves the same with every Go from 1.17.
	mux := http.NewServeMux()
	handle := func(method, path string, h http.HandlerFunc) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				http.Error(w, "bad method", http.StatusMethodNotAllowed)
				return
			}
			h(w, r)
		})
	}
	handle("GET", "/hello", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "hello\n")
	})
	handle("GET", "/missing", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	})
	handle("POST", "/items", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	})
	handle("GET", "/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "failed", http.StatusInternalServerError)
	})
	handle("GET", "/implicit", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "no WriteHeader\n")
	})
	handle("GET", "/empty", func(w http.ResponseWriter, r *http.Request) {})
	slowStarted := make(chan struct{}, 1)
	handle("GET", "/slow", func(w http.ResponseWriter, r *http.Request) {
		slowStarted <- struct{}{}
		time.Sleep(slowFor)
		w.WriteHeader(http.StatusOK)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux}
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second}
	if h2 {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{selfSigned()}}
		go srv.ServeTLS(ln, "", "")
		base = "https://" + ln.Addr().String()
		client.Transport = &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: true,
		}
	} else {
		go srv.Serve(ln)
	}

	counts := map[string]int{}
	var mu sync.Mutex
	do := func(method, path string, want int) {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("item")
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			fmt.Fprintln(os.Stderr, "request:", err)
			os.Exit(1)
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, method, path, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			fmt.Fprintf(os.Stderr, "%s %s: status %d, want %d\n", method, path, resp.StatusCode, want)
			os.Exit(1)
		}
		if h2 && resp.ProtoMajor != 2 {
			fmt.Fprintf(os.Stderr, "%s %s: %s, want HTTP/2\n", method, path, resp.Proto)
			os.Exit(1)
		}
		mu.Lock()
		counts[fmt.Sprintf("%s_%s_%d", method, strings.TrimPrefix(path, "/"), want)]++
		mu.Unlock()
	}
	slowDone := make(chan struct{})
	if overlap {
		go func() {
			do("GET", "/slow", 200)
			close(slowDone)
		}()
		<-slowStarted
	}
	for i := 0; i < rounds; i++ {
		for j := 0; j < 3; j++ {
			do("GET", "/hello", 200)
		}
		do("GET", "/missing", 404)
		do("POST", "/items", 201)
		do("POST", "/items", 201)
		do("GET", "/fail", 500)
		do("GET", "/implicit", 200)
		do("GET", "/empty", 200)
	}
	if overlap {
		<-slowDone
	} else {
		do("GET", "/slow", 200)
	}
	srv.Close()

	total := 0
	for k, v := range counts {
		fmt.Printf("%s=%d\n", k, v)
		total += v
	}
	fmt.Printf("requests=%d\n", total)
}

// selfSigned makes a certificate for 127.0.0.1, valid for an hour.
func selfSigned() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
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
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
