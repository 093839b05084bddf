package testenv

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a Redis or MinIO process of a test's own, on a free port, for
// fault tests that stop and restart servers: the shared test servers serve
// other packages' tests at the same time and must stay up.
type Server struct {
	t     testing.TB
	name  string
	bin   string
	args  []string
	env   []string
	addr  string
	ready func() bool
	cmd   *exec.Cmd
	log   *os.File
}

// PrivateRedis starts a redis-server without persistence (a restart
// empties it, as a Redis started without AOF loses its data).
func PrivateRedis(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	s := &Server{t: t, name: "redis", bin: bin, addr: addr,
		args: []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir()}}
	s.ready = func() bool { return redisPing(addr) }
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// PrivateMinIO starts a MinIO server with its data in a temporary
// directory that survives Stop and Start.
func PrivateMinIO(t testing.TB) (*Server, S3Config) {
	t.Helper()
	return PrivateMinIOIn(t, t.TempDir())
}

// PrivateMinIOIn is PrivateMinIO with its data in dir.
func PrivateMinIOIn(t testing.TB, dir string) (*Server, S3Config) {
	t.Helper()
	bin := os.Getenv("NERFLOW_MINIO_BIN")
	if bin == "" {
		cache := os.Getenv("NERFLOW_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "nerflow")
		}
		bin = filepath.Join(cache, "bin", "minio")
	}
	if _, err := os.Stat(bin); err != nil {
		missing(t, "the MinIO binary (NERFLOW_MINIO_BIN)")
	}
	addr := freeAddr(t)
	cfg := S3Config{Endpoint: addr, AccessKey: "faulttest", SecretKey: "faulttestsecret"}
	s := &Server{t: t, name: "minio", bin: bin, addr: addr,
		args: []string{"server", dir, "--address", addr, "--quiet"},
		env:  []string{"MINIO_ROOT_USER=" + cfg.AccessKey, "MINIO_ROOT_PASSWORD=" + cfg.SecretKey, "MINIO_BROWSER=off"}}
	s.ready = func() bool {
		c := http.Client{Timeout: time.Second}
		r, err := c.Get("http://" + addr + "/minio/health/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s, cfg
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Start starts the server (again) and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	f, err := os.CreateTemp("", "nerflow-"+s.name+"-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.name, err)
	}
	s.cmd, s.log = cmd, f
	deadline := time.Now().Add(60 * time.Second)
	for !s.ready() {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(f.Name())
			s.t.Fatalf("%s on %s did not become ready in 60s:\n%s", s.name, s.addr, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: nothing is flushed) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.log.Close()
	os.Remove(s.log.Name())
	s.cmd = nil
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}
