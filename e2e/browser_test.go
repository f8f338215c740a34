package e2e

// A headless Chromium that scenarios drive like a user: Debian's chromium
// package (make test installs it when missing, as root), started by chromedp with a fresh
// profile and no background traffic, with screenshots saved as test
// artifacts.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// artifactsEnv names the directory screenshots go to; by default they go to
// bin/e2e-artifacts/ in the checkout (bin/ is git-ignored).
const artifactsEnv = "MILLWRIGHT_E2E_ARTIFACTS"

// browserStepTimeout bounds one browser step (a navigation, a click, a
// screenshot). Waits for what a page shows use poll with their own
// deadlines.
const browserStepTimeout = time.Minute

// browserWindow is the viewport: wide enough for a workflow list with the
// Millwright search attribute columns.
const browserWindowWidth, browserWindowHeight = 1920, 1080

// errChromiumMissing is the failure when no chromium is installed. The UI
// test fails rather than skips: a skipped browser test would let a CI
// without the browser pass.
var errChromiumMissing = errors.New("no chromium found (looked for `chromium` on PATH and /usr/bin/chromium): " +
	"install Debian's chromium package (apt-get install chromium); make test installs it when run as root")

// browser is one headless Chromium tab.
type browser struct {
	t *testing.T
	// tab is the chromedp context of the tab; steps derive timeouts from it.
	tab context.Context
	// artifacts is where screenshots go.
	artifacts string
	// shots counts screenshots, to number their files in the order taken.
	shots int
}

// chromiumPath is the chromium to run: `chromium` on PATH, else Debian's
// /usr/bin/chromium.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errChromiumMissing
}

// newBrowser starts headless Chromium for the test and stops it at its end.
// When the test failed, the current page is saved as a screenshot and its
// address and text are logged first.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	artifacts, err := artifactsDir()
	if err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	// Only these flags, not chromedp's DefaultExecAllocatorOptions: the
	// network is closed, and without the background-networking, QUIC,
	// component-update and sync switches chromium keeps trying to reach
	// Google's services.
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(browserWindowWidth, browserWindowHeight),
	)
	tab, cancelTab := chromedp.NewContext(allocator)
	b := &browser{t: t, tab: tab, artifacts: artifacts}
	// Cleanups run last-registered first: the failure capture needs the
	// browser, which stops before the profile directory is removed.
	t.Cleanup(func() {
		cancelTab()
		cancelAllocator()
	})
	t.Cleanup(func() {
		if t.Failed() {
			b.captureFailure()
		}
	})
	// The browser lives as long as the context of its first step, so that
	// step runs on the tab's own context; a timer bounds it instead.
	started := time.Now()
	giveUp := time.AfterFunc(browserStepTimeout, cancelTab)
	err = chromedp.Do(tab, chromedp.Navigate("about:blank"))
	giveUp.Stop()
	if err != nil {
		t.Fatalf("browser: starting %s: %v", path, err)
	}
	t.Logf("chromium (%s) started in %s; screenshots go to %s", path, time.Since(started).Round(time.Millisecond), artifacts)
	return b
}

// artifactsDir is $MILLWRIGHT_E2E_ARTIFACTS, else bin/e2e-artifacts in the
// checkout, created if missing.
func artifactsDir() (string, error) {
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		// The test runs in e2e/; the checkout is its parent.
		dir = filepath.Join("..", "bin", "e2e-artifacts")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("artifacts dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("artifacts dir (%s): %w", artifactsEnv, err)
	}
	return dir, nil
}

// do runs browser steps, failing the test with what they were for.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, browserStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// evaluate runs a JavaScript expression in the page and decodes its value.
func evaluate[T any](b *browser, expression string) (T, error) {
	ctx, cancel := context.WithTimeout(b.tab, browserStepTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expression))
}

// resize sets the viewport's height (the width stays browserWindowWidth).
func (b *browser) resize(height int64) {
	b.t.Helper()
	b.do(fmt.Sprintf("resizing the viewport to %dx%d", browserWindowWidth, height), chromedp.EmulateViewport(browserWindowWidth, height))
}

// location is the address of the current page.
func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.tab, browserStepTimeout)
	defer cancel()
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return location
}

// screenshot saves the whole page as a numbered PNG in the artifacts
// directory, logs and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	path, err := b.trySaveScreenshot(name)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%s)", path, b.location())
	return path
}

var notFileNameCharacters = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func (b *browser) trySaveScreenshot(name string) (string, error) {
	ctx, cancel := context.WithTimeout(b.tab, browserStepTimeout)
	defer cancel()
	// Quality 100 makes chromedp capture a PNG (below it, a JPEG).
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "", fmt.Errorf("browser: screenshot %s: %w", name, err)
	}
	b.shots++
	file := fmt.Sprintf("%s-%d-%s.png", notFileNameCharacters.ReplaceAllString(b.t.Name(), "_"), b.shots, name)
	path := filepath.Join(b.artifacts, file)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "", fmt.Errorf("browser: saving screenshot %s: %w", name, err)
	}
	return path, nil
}

// captureFailure saves and describes the page the test failed on.
func (b *browser) captureFailure() {
	path, err := b.trySaveScreenshot("failure")
	if err != nil {
		b.t.Logf("no failure screenshot: %v", err)
	} else {
		b.t.Logf("failure screenshot %s", path)
	}
	text, err := evaluate[string](b, `document.body ? document.body.innerText : ""`)
	if err != nil {
		b.t.Logf("page text: %v", err)
		return
	}
	const limit = 4000
	text = strings.TrimSpace(text)
	if len(text) > limit {
		text = text[:limit] + "…"
	}
	b.t.Logf("the browser shows %s:\n%s", b.location(), text)
}
