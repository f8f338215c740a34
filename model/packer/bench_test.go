package packer_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/workload"
)

// benchmarksDir is ../shared/benchmarks beside the repository root (or
// $MILLWRIGHT_BENCHMARKS), where the example workloads live.
func benchmarksDir(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv("MILLWRIGHT_BENCHMARKS"); dir != "" {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "benchmarks")
		}
		if filepath.Dir(dir) == dir {
			tb.Fatalf("no go.mod above %s", wd)
		}
	}
}

var workloads sync.Map // file name -> *workload.File

// exampleWorkload reads an example workload once per test binary; it skips
// when shared/ is not beside the repository.
func exampleWorkload(tb testing.TB, name string) *workload.File {
	tb.Helper()
	if w, ok := workloads.Load(name); ok {
		return w.(*workload.File)
	}
	path := filepath.Join(benchmarksDir(tb), name)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		tb.Skipf("example workload %s is absent (shared/benchmarks lives beside the repository)", path)
	}
	w, err := workload.Read(path)
	if err != nil {
		tb.Fatal(err)
	}
	workloads.Store(name, w)
	return w
}

func benchmarkPack(b *testing.B, w *workload.File) {
	in, err := w.PackerInput()
	if err != nil {
		b.Fatal(err)
	}
	var r packer.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, err = packer.Pack(in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(r.NewNodes)), "nodes")
	b.ReportMetric(r.TotalPrice(), "$/h")
	b.ReportMetric(float64(len(r.Unschedulable)), "unschedulable")
}

// BenchmarkPack plans Karpenter's scheduling-benchmark mix (diverse) and a
// requests-only mix (generic) at 1,000, 5,000 and 10,000 pods over the
// 1,101 catalog types.
func BenchmarkPack(b *testing.B) {
	diverse := exampleWorkload(b, "diverse-1000.json")
	generic := exampleWorkload(b, "generic-5000.json")
	for _, bc := range []struct {
		name string
		w    *workload.File
	}{
		{"diverse-1000", diverse},
		{"diverse-5000", diverse.Scaled(5)},
		{"diverse-10000", diverse.Scaled(10)},
		{"generic-1000", generic.Truncated(1000)},
		{"generic-5000", generic},
		{"generic-10000", generic.Scaled(2)},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkPack(b, bc.w) })
	}
}
