//go:build linux

// Package docs runs the documentation: every ```sh / ```bash block of
// README.md and docs/*.md is executed, in order, one bash session per file,
// against a fresh `capstan serve` the test starts for that file; then every
// link of the file to this machine (what the docs tell a reader to open in a
// browser) is opened in headless Chromium against that server and must show
// text (links_test.go). The convention doc authors follow is in
// docs/architecture.md ("Docs that run").
package docs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// fileTimeout bounds one file's whole session; the docs keep each file well
// under it (minutes-long examples carry a skip marker instead).
const fileTimeout = 150 * time.Second

// block is one fenced code block of a markdown file.
type block struct {
	line   int    // 1-based line of the opening fence
	lang   string // first word of the info string
	body   string
	skip   string // reason from <!-- docs-test: skip: REASON -->
	toFile string // NAME from <!-- docs-test: file NAME -->
}

func (b block) runs() bool { return (b.lang == "sh" || b.lang == "bash") && b.skip == "" }

// doc is a parsed markdown file.
type doc struct {
	path      string
	blocks    []block
	serveArgs []string // from <!-- docs-test: serve ARGS -->
	s3        bool     // <!-- docs-test: s3 -->
	llamacpp  bool     // <!-- docs-test: llamacpp -->
	copies    []string // repository paths from <!-- docs-test: copy PATH -->
	links     []link   // links to a loopback address, in order
	problems  []string // file:line: message, each one fails the file
}

// link is a URL the prose tells a reader to open in a browser: a markdown
// link (autolink <URL>, inline [text](URL) or reference definition
// [id]: URL) outside code blocks and code spans whose host is a loopback
// address (127.0.0.1, localhost, ::1, 0.0.0.0).
type link struct {
	line int    // 1-based line of the link
	url  string // as written
	skip string // reason from <!-- docs-test: skip-open: REASON -->
}

var (
	fenceRe  = regexp.MustCompile("^( {0,3}|\\s*)(`{3,}|~{3,})\\s*(.*)$")
	markerRe = regexp.MustCompile(`^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$`)
	// Issue numbers belong in the tracker, not in the docs.
	issueRe = regexp.MustCompile(`(?i)\bissues?\s*#?\d+\b|(^|[\s(\[])#\d+\b|\bthe issue's\b`)
	// An aws CLI call: `aws` as a command word followed by a service.
	awsRe = regexp.MustCompile(`(^|[\s;&|(\x60]|\$\()aws\s+[a-z]`)
	// Markdown links: autolinks, inline links (with an optional title) and
	// reference definitions.
	autolinkRe = regexp.MustCompile(`<(https?://[^<>\s]+)>`)
	inlineRe   = regexp.MustCompile(`\]\(\s*<?(https?://[^)\s>]+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDefRe   = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(https?://[^\s>]+)`)
	// "open `http://127.0.0.1:…`": a URL to open written as code, which the
	// test would not open.
	openCodeRe = regexp.MustCompile("(?i)\\bopen\\s+`(https?://(?:127\\.0\\.0\\.1|localhost|0\\.0\\.0\\.0|\\[::1\\])[^`]*)`")
)

// parse reads a markdown file into blocks and markers.
// name is the path shown in messages.
func parse(path, name string) (*doc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &doc{path: name}
	path = name
	lines := strings.Split(string(raw), "\n")
	var pendingSkip, pendingFile string
	pendingLine := 0
	// A skip-open marker covers the links of the paragraph that follows it.
	var openSkip string
	openSkipLine, openSkipLinks := 0, 0
	inPara := false
	endOpenSkip := func() {
		if openSkip != "" && openSkipLinks == 0 {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: skip-open marker not followed by a paragraph with a link to open", path, openSkipLine))
		}
		openSkip, openSkipLinks, inPara = "", 0, false
	}
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		if m := markerRe.FindStringSubmatch(ln); m != nil {
			endOpenSkip()
			word, rest, _ := strings.Cut(m[1], " ")
			word = strings.TrimSuffix(word, ":")
			rest = strings.TrimSpace(rest)
			switch word {
			case "skip":
				if rest == "" {
					d.problems = append(d.problems, fmt.Sprintf("%s:%d: skip marker without a reason", path, i+1))
					rest = "(no reason)"
				}
				pendingSkip, pendingLine = rest, i+1
			case "file":
				if rest == "" || strings.ContainsAny(rest, " \\") || filepath.IsAbs(rest) || !filepath.IsLocal(rest) {
					d.problems = append(d.problems, fmt.Sprintf("%s:%d: file marker needs a relative NAME inside the working dir, got %q", path, i+1, rest))
				}
				pendingFile, pendingLine = rest, i+1
			case "serve":
				d.serveArgs = append(d.serveArgs, strings.Fields(rest)...)
			case "s3":
				d.s3 = true
			case "llamacpp":
				d.llamacpp = true
			case "copy":
				if rest == "" || strings.ContainsAny(rest, " \\") || !filepath.IsLocal(rest) {
					d.problems = append(d.problems, fmt.Sprintf("%s:%d: copy marker needs a relative PATH inside the repository, got %q", path, i+1, rest))
					continue
				}
				d.copies = append(d.copies, rest)
			case "skip-open":
				if rest == "" {
					d.problems = append(d.problems, fmt.Sprintf("%s:%d: skip-open marker without a reason", path, i+1))
					rest = "(no reason)"
				}
				openSkip, openSkipLine = rest, i+1
			default:
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: unknown docs-test marker %q", path, i+1, m[1]))
			}
			continue
		}
		m := fenceRe.FindStringSubmatch(ln)
		if m == nil {
			if openSkip != "" {
				if strings.TrimSpace(ln) != "" {
					inPara = true
				} else if inPara {
					endOpenSkip()
				}
			}
			for _, u := range linksIn(ln) {
				d.links = append(d.links, link{line: i + 1, url: u, skip: openSkip})
				if openSkip != "" {
					openSkipLinks++
				}
			}
			if u := openAsCode(ln); u != "" {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: a URL to open written as code (`%s`): write it as a link, <%s>, so the docs test opens it", path, i+1, u, u))
			}
			if strings.TrimSpace(ln) != "" && (pendingSkip != "" || pendingFile != "") {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: docs-test marker not followed by a code block", path, pendingLine))
				pendingSkip, pendingFile = "", ""
			}
			if hit := issueRe.FindString(ln); hit != "" {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: issue number in the docs (%q): say what it is instead", path, i+1, strings.TrimSpace(hit)))
			}
			continue
		}
		endOpenSkip()
		indent, fence, info := m[1], m[2], strings.TrimSpace(m[3])
		b := block{line: i + 1, skip: pendingSkip, toFile: pendingFile}
		pendingSkip, pendingFile = "", ""
		if f := strings.Fields(info); len(f) > 0 {
			b.lang = strings.ToLower(strings.Trim(f[0], "{}."))
		} else {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: code block without an info string (```sh runs, ```text is output, ```yaml/```json/... are files)", path, i+1))
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			t := strings.TrimSpace(l)
			if strings.HasPrefix(t, fence[:3]) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(l, indent))
		}
		if !closed {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: code block never closed", path, b.line))
		}
		b.body = strings.Join(body, "\n") + "\n"
		if b.toFile != "" && (b.lang == "sh" || b.lang == "bash") {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: a file marker goes on a file block (yaml, json, ...), not on a %s block", path, b.line, b.lang))
		}
		d.blocks = append(d.blocks, b)
	}
	if pendingSkip != "" || pendingFile != "" {
		d.problems = append(d.problems, fmt.Sprintf("%s:%d: docs-test marker not followed by a code block", path, pendingLine))
	}
	endOpenSkip()
	d.problems = append(d.problems, d.awsProblems()...)
	return d, nil
}

// awsProblems lists aws commands in run blocks that would reach real AWS: each
// needs $EP / --endpoint-url unless the file exports AWS_ENDPOINT_URL.
func (d *doc) awsProblems() []string {
	for _, b := range d.blocks {
		if b.runs() && strings.Contains(b.body, "export AWS_ENDPOINT_URL") {
			return nil
		}
	}
	var out []string
	for _, b := range d.blocks {
		if !b.runs() {
			continue
		}
		for _, c := range logicalLines(b.body) {
			if strings.HasPrefix(strings.TrimSpace(c.text), "#") || !awsRe.MatchString(c.text) {
				continue
			}
			if !strings.Contains(c.text, "$EP") && !strings.Contains(c.text, "${EP}") && !strings.Contains(c.text, "--endpoint-url") {
				out = append(out, fmt.Sprintf("%s:%d: aws command without $EP or --endpoint-url: %s", d.path, b.line+1+c.offset, strings.TrimSpace(c.text)))
			}
		}
	}
	return out
}

// linksIn returns the URLs of the markdown links on a line of prose that
// point at a loopback address; code spans are not links.
func linksIn(ln string) []string {
	ln = blankCodeSpans(ln)
	var out []string
	for _, re := range []*regexp.Regexp{autolinkRe, inlineRe, refDefRe} {
		for _, m := range re.FindAllStringSubmatch(ln, -1) {
			if isLoopback(m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// openAsCode returns the URL of prose that says open `http://127.0.0.1:…`
// (the word itself not in code), "" when the line has none.
func openAsCode(ln string) string {
	blanked := blankCodeSpans(ln)
	for _, m := range openCodeRe.FindAllStringSubmatchIndex(ln, -1) {
		if strings.EqualFold(blanked[m[0]:m[0]+4], "open") {
			return ln[m[2]:m[3]]
		}
	}
	return ""
}

// isLoopback reports whether raw is a URL on this machine.
func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1", "0.0.0.0":
		return true
	}
	return false
}

// blankCodeSpans replaces each code span of a line (a run of backticks up to
// the next run of the same length) with spaces.
func blankCodeSpans(ln string) string {
	b := []byte(ln)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closeAt := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			k := 0
			for j+k < len(b) && b[j+k] == '`' {
				k++
			}
			if k == n {
				closeAt = j
				break
			}
			j += k
		}
		if closeAt < 0 {
			i += n
			continue
		}
		for j := i; j < closeAt+n; j++ {
			b[j] = ' '
		}
		i = closeAt + n
	}
	return string(b)
}

type logicalLine struct {
	offset int // line within the block where it starts
	text   string
}

// logicalLines joins backslash continuations.
func logicalLines(body string) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := -1
	for i, l := range strings.Split(body, "\n") {
		if start < 0 {
			start = i
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(l)
		out = append(out, logicalLine{start, cur.String()})
		cur.Reset()
		start = -1
	}
	return out
}

func TestDocs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(more)
	for _, f := range more {
		files = append(files, filepath.Join("docs", filepath.Base(f)))
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is required")
	}
	bin := capstanBinary(t, root)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			d, err := parse(filepath.Join(root, f), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range d.problems {
				t.Error(p)
			}
			if t.Failed() {
				return
			}
			for _, b := range d.blocks {
				if b.skip != "" {
					t.Logf("skip %s:%d: %s", f, b.line, b.skip)
				}
			}
			if failure := runDoc(t, bin, d); failure != "" {
				t.Error(failure)
			}
		})
	}
}

// TestParse checks the parser on a small document: the checks that fail a
// file are what keeps the docs runnable.
func TestParse(t *testing.T) {
	cases := []struct {
		name, md string
		problem  string // substring of the one expected problem, "" for none
		runs     int
	}{
		{"tagged", "```sh\necho hi\n```\n\n```text\nhi\n```\n", "", 1},
		{"untagged", "text\n\n```\necho hi\n```\n", "x.md:3: code block without an info string", 0},
		{"skip", "<!-- docs-test: skip: needs a GPU -->\n```sh\nnvidia-smi\n```\n", "", 0},
		{"skip without reason", "<!-- docs-test: skip -->\n```sh\nx\n```\n", "skip marker without a reason", 0},
		{"dangling marker", "<!-- docs-test: file a.yaml -->\nprose\n```yaml\na: 1\n```\n", "not followed by a code block", 0},
		{"aws without endpoint", "```sh\naws sagemaker list-endpoints\n```\n", "x.md:2: aws command without $EP", 1},
		{"aws continued", "```sh\naws sagemaker \\\n  $EP list-endpoints\n```\n", "", 1},
		{"aws with AWS_ENDPOINT_URL", "```sh\nexport AWS_ENDPOINT_URL=http://127.0.0.1:8080\naws sagemaker list-endpoints\n```\n", "", 1},
		{"aws in a skipped block", "<!-- docs-test: skip: real AWS -->\n```sh\naws sagemaker list-endpoints\n```\n", "", 0},
		{"issue number", "Fixed in issue 3.\n", "x.md:1: issue number", 0},
		{"issue hash", "See #12 for details.\n", "issue number", 0},
		{"heading is fine", "# Title\n\n## 2 things\n", "", 0},
		{"copy", "<!-- docs-test: copy notebooks -->\n", "", 0},
		{"copy outside the repository", "<!-- docs-test: copy ../secrets -->\n", "copy marker needs a relative PATH", 0},
		{"unclosed", "```sh\necho\n", "never closed", 1},
		{"indented", "1. step\n\n   ```sh\n   echo hi\n   ```\n", "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.md")
			if err := os.WriteFile(p, []byte(c.md), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := parse(p, "x.md")
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			for _, b := range d.blocks {
				if b.runs() {
					runs++
				}
			}
			if runs != c.runs {
				t.Errorf("run blocks = %d, want %d", runs, c.runs)
			}
			switch {
			case c.problem == "" && len(d.problems) > 0:
				t.Errorf("unexpected problems: %q", d.problems)
			case c.problem != "" && (len(d.problems) != 1 || !strings.Contains(d.problems[0], c.problem)):
				t.Errorf("problems = %q, want one containing %q", d.problems, c.problem)
			}
		})
	}
}

// TestRunner drives the runner on small documents: the environment a block
// sees (server address rewritten, capstan on PATH, AWS settings, file
// blocks), and a failing block reported with its line, body and output.
func TestRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts capstan serve")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := capstanBinary(t, root)
	cases := []struct {
		name, md string
		want     []string // substrings of the failure; nil: must pass
	}{
		{"environment", "<!-- docs-test: file sub/a.yaml -->\n```yaml\nk: v\n```\n\n```sh\n" +
			"grep -q 'k: v' sub/a.yaml\n" +
			"curl -sf http://127.0.0.1:8080/healthz >/dev/null\n" +
			"go run ./cmd/capstan version >/dev/null && capstan version >/dev/null\n" +
			"test \"$AWS_DEFAULT_REGION\" = us-east-1 && test -n \"$AWS_ACCESS_KEY_ID\"\n" +
			"test -n \"$AWS_ENDPOINT_URL\" && test -n \"$CAPSTAN_SERVER\"\nx=1\n```\n\n" +
			"```bash\ntest \"$x\" = 1   # one session per file\n```\n", nil},
		{"failing block", "```sh\necho first\n```\n\ntext\n\n```sh\necho the-output\nfalse\necho never\n```\n",
			[]string{"x.md:7: block failed", "--- block\necho the-output\nfalse", "--- output\nthe-output\n"}},
		{"pipefail", "```sh\nfalse | cat\n```\n", []string{"x.md:1: block failed"}},
		{"exit", "```sh\nexit 0\n```\n", []string{"x.md:1: block ended the session early"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.md")
			if err := os.WriteFile(p, []byte(c.md), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := parse(p, "x.md")
			if err != nil {
				t.Fatal(err)
			}
			if len(d.problems) > 0 {
				t.Fatalf("problems: %q", d.problems)
			}
			failure := runDoc(t, bin, d)
			if c.want == nil && failure != "" {
				t.Fatalf("want a pass, got:\n%s", failure)
			}
			for _, w := range c.want {
				if !strings.Contains(failure, w) {
					t.Errorf("failure does not contain %q:\n%s", w, failure)
				}
			}
		})
	}
}

// capstanBinary returns $CAPSTAN_BIN when set (test/run.sh builds
// bin/capstan), else builds ./cmd/capstan into a temp dir.
func capstanBinary(t *testing.T, root string) string {
	t.Helper()
	if b := os.Getenv("CAPSTAN_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("CAPSTAN_BIN: %v", err)
		}
		return abs
	}
	out := filepath.Join(t.TempDir(), "capstan")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/capstan")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/capstan: %v\n%s", err, b)
	}
	return out
}

// runDoc runs d's blocks in one bash session against a fresh server and
// returns what failed ("" when every block passed). The server and every
// process of the session are stopped in t's cleanup.
func runDoc(t *testing.T, bin string, d *doc) string {
	var run []block
	for _, b := range d.blocks {
		if b.runs() || (b.toFile != "" && b.skip == "") {
			run = append(run, b)
		}
	}
	hasRun := false
	for _, b := range run {
		hasRun = hasRun || b.runs()
	}
	opens := false
	for _, l := range d.links {
		opens = opens || l.skip == ""
	}
	if !hasRun && !opens {
		return ""
	}
	for _, b := range run {
		if b.runs() && awsRe.MatchString(b.body) {
			if _, err := exec.LookPath("aws"); err != nil {
				t.Fatalf("%s:%d: the block runs the aws CLI, which is not on PATH (test/run.sh installs it)", d.path, b.line)
			}
			break
		}
	}
	tmp := t.TempDir()
	work := filepath.Join(tmp, "work")
	logs := filepath.Join(tmp, "logs")
	binDir := filepath.Join(tmp, "bin")
	for _, dir := range []string{work, logs, binDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "capstan")); err != nil {
		t.Fatal(err)
	}
	// Repository files the page uses, where a user's clone has them.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.copies {
		src, dst := filepath.Join(root, c), filepath.Join(work, c)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(src)
		switch {
		case err != nil:
			t.Fatalf("%s: copy %s: %v", d.path, c, err)
		case fi.IsDir():
			err = os.CopyFS(dst, os.DirFS(src))
		default:
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
		}
		if err != nil {
			t.Fatalf("%s: copy %s: %v", d.path, c, err)
		}
	}
	// Files named by markers exist from the start, so a serve marker's
	// --config can name one; the session writes them again in order.
	for _, b := range run {
		if b.toFile != "" {
			if _, err := os.Stat(filepath.Join(work, b.toFile)); err == nil {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(work, b.toFile)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, b.toFile), []byte(b.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
	defer cancel()
	path := binDir + string(os.PathListSeparator) + os.Getenv("PATH")
	if k8s := os.Getenv("CAPSTAN_K8S_BIN"); k8s != "" {
		path = k8s + string(os.PathListSeparator) + path // the kubectl test/k8s/binaries.sh builds
	}
	env := append(os.Environ(),
		"PATH="+path,
		"AWS_ACCESS_KEY_ID=docs", "AWS_SECRET_ACCESS_KEY=docs", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_PAGER=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"HOME="+tmp, "NO_COLOR=1",
	)
	serveArgs := append([]string(nil), d.serveArgs...)
	if d.s3 {
		s3 := startMoto(t, tmp, env)
		env = append(env, "S3_ENDPOINT="+s3)
		serveArgs = append(serveArgs, "--s3-endpoint", s3)
	}
	if d.llamacpp {
		// llama-server on PATH (server and session), and the directory
		// with the tiny model as LLAMACPP_DIR.
		dir := testutil.LlamaCppDir(t)
		env = append(env, "PATH="+dir+string(os.PathListSeparator)+path, "LLAMACPP_DIR="+dir)
	}
	addr := startServer(t, bin, tmp, work, env, serveArgs)
	// The safety net: an aws call that forgot $EP still reaches the server.
	env = append(env, "AWS_ENDPOINT_URL=http://"+addr)
	// The capstan CLI's default server is 127.0.0.1:8080 too.
	env = append(env, "CAPSTAN_SERVER=http://"+addr)

	script := buildScript(d, run, bin, addr, logs)
	scriptPath := filepath.Join(tmp, "doc.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(logs, "state")
	cmd := exec.Command("bash", "--noprofile", "--norc", scriptPath)
	cmd.Dir = work
	cmd.Env = append(env, "DOCS_STATE="+state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(logs, "session"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd.Process.Pid) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	timedOut := false
	select {
	case runErr = <-done:
	case <-ctx.Done():
		timedOut = true
		killGroup(cmd.Process.Pid)
		runErr = <-done
	}
	st, _ := os.ReadFile(state)
	last := strings.TrimSpace(string(st))
	if os.Getenv("DOCS_TEST_VERBOSE") != "" {
		for i, b := range run {
			if out, err := os.ReadFile(filepath.Join(logs, strconv.Itoa(i))); err == nil && b.runs() {
				t.Logf("%s:%d output:\n%s", d.path, b.line, out)
			}
		}
	}
	if runErr == nil && last == "done" {
		t.Logf("%s: %d blocks ran in %s%s", d.path, countRuns(run), time.Since(start).Round(100*time.Millisecond), slowBlocks(d, run, logs))
		return openLinks(t, d, addr)
	}
	idx, convErr := strconv.Atoi(last)
	if convErr != nil || idx < 0 || idx >= len(run) {
		session, _ := os.ReadFile(filepath.Join(logs, "session"))
		return fmt.Sprintf("%s: the session ended before its first block (%v):\n%s", d.path, runErr, session)
	}
	b := run[idx]
	output, _ := os.ReadFile(filepath.Join(logs, strconv.Itoa(idx)))
	why := fmt.Sprintf("failed (%v)", runErr)
	if timedOut {
		why = fmt.Sprintf("did not finish within the file's %s", fileTimeout)
	}
	if runErr == nil {
		why = "ended the session early (exit?)"
	}
	return fmt.Sprintf("%s:%d: block %s\n--- block\n%s--- output\n%s", d.path, b.line, why, b.body, tail(string(output), 8<<10))
}

// slowBlocks names the blocks that took over 5 s, from logs/times.
func slowBlocks(d *doc, run []block, logs string) string {
	raw, err := os.ReadFile(filepath.Join(logs, "times"))
	if err != nil {
		return ""
	}
	var out []string
	prevIdx, prevT := -1, 0.0
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		at, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		if prevIdx >= 0 && at-prevT > 5 {
			out = append(out, fmt.Sprintf("%s:%d %.1fs", d.path, run[prevIdx].line, at-prevT))
		}
		prevIdx, prevT = -1, at
		if i, err := strconv.Atoi(f[0]); err == nil && i < len(run) {
			prevIdx = i
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (slow: " + strings.Join(out, ", ") + ")"
}

func countRuns(bs []block) int {
	n := 0
	for _, b := range bs {
		if b.runs() {
			n++
		}
	}
	return n
}

// buildScript turns the blocks into one bash script: each block's output goes
// to logs/N and the state file names the block running, "done" at the end.
func buildScript(d *doc, run []block, bin, addr, logs string) string {
	var s strings.Builder
	s.WriteString("set -eo pipefail\n")
	fmt.Fprintf(&s, "__docs_state() { echo \"$1\" >%q; echo \"$1 $EPOCHREALTIME\" >>%q; }\n",
		filepath.Join(logs, "state"), filepath.Join(logs, "times"))
	for i, b := range run {
		fmt.Fprintf(&s, "\n__docs_state %d\nexec >%q 2>&1\n", i, filepath.Join(logs, strconv.Itoa(i)))
		if b.toFile != "" {
			delim := "DOCS_TEST_EOF"
			for strings.Contains(b.body, delim) {
				delim += "_"
			}
			fmt.Fprintf(&s, "mkdir -p %q\ncat >%q <<'%s'\n%s%s\n", filepath.Dir(b.toFile), b.toFile, delim, b.body, delim)
			continue
		}
		fmt.Fprintf(&s, "# %s:%d\n%s", d.path, b.line, rewrite(b.body, bin, addr))
	}
	s.WriteString("\n__docs_state done\n")
	return s.String()
}

// rewrite points a block at the test's server and binary.
func rewrite(body, bin, addr string) string {
	body = strings.ReplaceAll(body, "127.0.0.1:8080", addr)
	body = strings.ReplaceAll(body, "localhost:8080", addr)
	body = strings.ReplaceAll(body, "go run ./cmd/capstan", bin)
	return body
}

// startServer starts `capstan serve` on a free port with its own data dir and
// returns host:port; the cleanup stops it and its engines.
func startServer(t *testing.T, bin, tmp, work string, env, args []string) string {
	t.Helper()
	logPath := filepath.Join(tmp, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The data dir is the default, ./capstan-data in the working dir, as
	// for a reader who runs `capstan serve` where they run the commands.
	full := append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Dir = work
	cmd.Env = env
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if a, ok := strings.CutPrefix(line, "capstan serving on "); ok {
				select {
				case found <- strings.TrimSpace(a):
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		killGroup(cmd.Process.Pid)
		killUnder(tmp)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("server log (tail):\n%s", tail(string(b), 6<<10))
		}
		logf.Close()
	})
	select {
	case a := <-found:
		return strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://")
	case <-exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("capstan serve %s exited:\n%s", strings.Join(args, " "), tail(string(b), 4<<10))
	case <-time.After(30 * time.Second):
		t.Fatal("capstan serve did not print its address within 30s")
	}
	return ""
}

// startMoto starts moto_server (an S3-compatible store) on a free port.
func startMoto(t *testing.T, tmp string, env []string) string {
	t.Helper()
	if _, err := exec.LookPath("moto_server"); err != nil {
		t.Fatal("the file needs moto_server (test/run.sh installs moto[server])")
	}
	port := freePort(t)
	logf, err := os.Create(filepath.Join(tmp, "moto.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("moto_server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroup(cmd.Process.Pid)
		_, _ = cmd.Process.Wait()
		logf.Close()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return url
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("moto_server did not listen within 30s")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// killGroup SIGKILLs the process group led by pid.
func killGroup(pid int) {
	if pid > 0 {
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killUnder SIGKILLs any process left whose working directory or stderr is
// under dir (engines the server started in their own process groups, or
// something a block put in the background and detached).
func killUnder(dir string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, link := range []string{"cwd", "fd/2"} {
			p, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, link))
			if err == nil && (p == dir || strings.HasPrefix(p, dir+string(os.PathSeparator))) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
