package command

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is the top-level Dockerfile as instructions: continuation
// lines joined, comments and blank lines dropped, each split into its
// keyword (upper case) and the rest.
type dockerfile []struct{ op, args string }

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur += cont + " "
			continue
		}
		cur += line
		op, args, _ := strings.Cut(cur, " ")
		df = append(df, struct{ op, args string }{strings.ToUpper(op), strings.TrimSpace(args)})
		cur = ""
	}
	return df
}

// stages returns the instructions of each stage, from its FROM on.
func (df dockerfile) stages() []dockerfile {
	var out []dockerfile
	for _, in := range df {
		if in.op == "FROM" {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], in)
		}
	}
	return out
}

// all returns the arguments of every op instruction of df.
func (df dockerfile) all(op string) []string {
	var out []string
	for _, in := range df {
		if in.op == op {
			out = append(out, in.args)
		}
	}
	return out
}

// execForm parses an instruction's JSON array form (CMD ["a", "b"]).
func execForm(t *testing.T, what, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("%s %s: want the exec form, a JSON array (%v)", what, args, err)
	}
	return argv
}

// TestDockerfile checks the Dockerfile's shape, since no container engine
// runs here: a Go build stage making a static binary, a distroless final
// stage run as a non-root user with /data a volume, the RESP port exposed,
// and a CMD the binary accepts that starts the admin listener on loopback,
// whose readiness endpoint the HEALTHCHECK probes. The health check runs, as
// the test's binary, against a live server and a dead address, and exits 1
// on the latter: 2 is reserved in a Docker HEALTHCHECK.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	df := readDockerfile(t)
	stages := df.stages()
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2: build and run", len(stages))
	}
	build, final := stages[0], stages[1]
	if from := build[0].args; !regexp.MustCompile(`^golang:\S+ AS build$`).MatchString(from) {
		t.Errorf("build stage FROM %s, want golang:... AS build", from)
	}
	if runs := strings.Join(build.all("RUN"), "\n"); !strings.Contains(runs, "CGO_ENABLED=0 go build") {
		t.Errorf("the build stage does not build with CGO_ENABLED=0:\n%s", runs)
	}
	if from := final[0].args; !strings.HasPrefix(from, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want distroless/static", from)
	}
	copies := strings.Join(final.all("COPY"), "\n")
	if !strings.Contains(copies, "--from=build /out/leasehold /leasehold") {
		t.Errorf("the final stage does not copy the binary from the build stage:\n%s", copies)
	}
	users := final.all("USER")
	if len(users) != 1 {
		t.Fatalf("USER %q, want one", users)
	}
	uid, _, _ := strings.Cut(users[0], ":")
	if uid == "0" || uid == "root" || uid == "" {
		t.Errorf("USER %s: want a non-root user", users[0])
	}
	if !strings.Contains(copies, "--chown="+users[0]+" /out/data /data") {
		t.Errorf("/data is not made for USER %s, who must write to the volume:\n%s", users[0], copies)
	}
	if v := final.all("VOLUME"); !slices.Equal(v, []string{"/data"}) {
		t.Errorf("VOLUME %q, want /data", v)
	}
	if e := final.all("EXPOSE"); !slices.Equal(e, []string{"7379"}) {
		t.Errorf("EXPOSE %q, want 7379", e)
	}
	entry := execForm(t, "ENTRYPOINT", strings.Join(final.all("ENTRYPOINT"), ""))
	cmd := execForm(t, "CMD", strings.Join(final.all("CMD"), ""))
	if !slices.Equal(entry, []string{"/leasehold"}) || !slices.Contains(cmd, "--data-dir") || cmd[slices.Index(cmd, "--data-dir")+1] != "/data" {
		t.Errorf("ENTRYPOINT %q CMD %q: want /leasehold serving with --data-dir /data", entry, cmd)
	}

	hc := final.all("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("HEALTHCHECK %q, want one", hc)
	}
	_, form, ok := strings.Cut(hc[0], "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s: want CMD", hc[0])
	}
	probe := execForm(t, "HEALTHCHECK CMD", form)
	if len(probe) < 2 || probe[0] != "/leasehold" || probe[1] != "probe" || !slices.Contains(probe, "--url") {
		t.Fatalf("HEALTHCHECK CMD %q: want /leasehold probe --url", probe)
	}
	i := slices.Index(cmd, "--http-addr")
	if i < 0 {
		t.Fatalf("CMD %q: want --http-addr, the admin listener the health check probes", cmd)
	}
	httpAddr := cmd[i+1]
	if host, _, err := net.SplitHostPort(httpAddr); err != nil || host != "127.0.0.1" {
		t.Errorf("CMD --http-addr %s: want loopback, 127.0.0.1:PORT (%v)", httpAddr, err)
	}
	probeURL := probe[slices.Index(probe, "--url")+1]
	if probeURL != "http://"+httpAddr+"/readyz" {
		t.Errorf("HEALTHCHECK --url %s: want the readiness endpoint of CMD's --http-addr, http://%s/readyz", probeURL, httpAddr)
	}
	// The image's command, as the test's binary on free ports: it
	// serves, and the probe, pointed at it, passes.
	dataDir := t.TempDir()
	var liveHTTP string
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		liveHTTP = freeAddr(t)
		args := slices.Clone(cmd)
		args[slices.Index(args, "--addr")+1] = addr
		args[slices.Index(args, "--data-dir")+1] = dataDir
		args[slices.Index(args, "--http-addr")+1] = liveHTTP
		return nil, args
	})
	defer p.stop(os.Interrupt)
	if err := client(t, addr).Ping(testCtx(t)).Err(); err != nil { // answered: Serve runs
		t.Fatal(err)
	}
	args := slices.Clone(probe[1:])
	args[slices.Index(args, "--url")+1] = "http://" + liveHTTP + "/readyz"
	if stdout, stderr, exit := run(t, nil, args...); exit != 0 {
		t.Errorf("health check %q against the server: exit %d\n%s%s", args, exit, stdout, stderr)
	}
	args[slices.Index(args, "--url")+1] = "http://" + freeAddr(t) + "/readyz"
	if _, _, exit := run(t, nil, args...); exit != 1 {
		t.Errorf("health check %q with no server: exit %d, want 1 (unhealthy)", args, exit)
	}
}

// TestStaticBuild builds the binary as the Dockerfile does, CGO_ENABLED=0,
// and checks that it is static: the image it runs in has no libc. Not
// parallel: on a cold build cache it compiles everything again (about two
// minutes on two cores), which would slow the timing-bound tests beside it.
func TestStaticBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "leasehold")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^\s+build\s+CGO_ENABLED=0$`).Match(out) {
		t.Errorf("go version -m: %v; want build CGO_ENABLED=0 in:\n%s", err, out)
	}
	if _, err := exec.LookPath("file"); err != nil {
		t.Log("no file(1) here: the ELF's linking is not checked")
		return
	}
	out, err = exec.Command("file", "-L", bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "statically linked") {
		t.Errorf("file: %v; want statically linked: %s", err, out)
	}
}
