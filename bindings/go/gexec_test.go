// examples/mlp through the bindings: loaded from files and from memory, run, compared with
// the values of tests/c_api/test_c_api.c; then the error cases, each with its code and
// message. GEXEC_SOURCE_DIR names gexec's source tree, GEXEC_TEST_KERNELS the kernel
// library (libgexec_test_kernels.so).
package gexec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

var (
	x        = []float32{0.5, -1, 2, 0.25}
	expected = []float32{0.400786, 0.336452, 0.262762}
)

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("set %s (bindings/go/run_test.sh does)", name)
	}
	return v
}

func mlp(t *testing.T) string     { return filepath.Join(env(t, "GEXEC_SOURCE_DIR"), "examples", "mlp") }
func kernels(t *testing.T) string { return env(t, "GEXEC_TEST_KERNELS") }

func load(t *testing.T) *Model {
	m, err := LoadFiles(nil, filepath.Join(mlp(t), "graph.json"), kernels(t), filepath.Join(mlp(t), "params.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func checkExpected(t *testing.T, y []float32) {
	t.Helper()
	if len(y) != 3 {
		t.Fatalf("output %v, expected %v", y, expected)
	}
	for i := range y {
		if math.Abs(float64(y[i]-expected[i])) >= 2e-6 {
			t.Fatalf("output %v, expected %v", y, expected)
		}
	}
}

func runX(t *testing.T, e *Executor) []float32 {
	t.Helper()
	i, err := e.InputIndex("x")
	must(t, err)
	must(t, SetInput(e, i, x, []int64{1, 4}))
	must(t, e.Run())
	y, shape, err := Output[float32](e, 0)
	must(t, err)
	if !reflect.DeepEqual(shape, []int64{1, 3}) {
		t.Fatalf("shape %v", shape)
	}
	return y
}

func expectError(t *testing.T, err error, code int, needle string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, expected a *gexec.Error with code %d and %q", err, code, needle)
	}
	if e.Code != code || !strings.Contains(e.Message, needle) {
		t.Fatalf("got code %d %q, expected code %d and %q", e.Code, e.Message, code, needle)
	}
	t.Logf("ok: %v", e)
}

func TestVersion(t *testing.T) {
	if v := Version(); len(strings.Split(v, ".")) != 3 {
		t.Fatalf("version %q", v)
	}
}

func TestFilesWithRuntime(t *testing.T) {
	rt, err := NewRuntime(2)
	must(t, err)
	model, err := LoadFiles(rt, filepath.Join(mlp(t), "graph.json"), kernels(t), filepath.Join(mlp(t), "params.bin"))
	must(t, err)
	must(t, rt.Close()) // the model keeps the runtime alive
	must(t, rt.Close()) // a second Close does nothing
	n, err := model.ParamBytes()
	must(t, err)
	if n != (8*4+3*8)*4 {
		t.Fatalf("param bytes %d", n)
	}
	e, err := model.NewExecutor()
	must(t, err)
	defer e.Close()
	nin, err := e.NumInputs()
	must(t, err)
	nout, err := e.NumOutputs()
	must(t, err)
	if nin != 3 || nout != 1 {
		t.Fatalf("%d inputs, %d outputs", nin, nout)
	}
	name, err := e.InputName(1)
	must(t, err)
	if name != "w1" {
		t.Fatalf("input 1 is %q", name)
	}
	outName, err := e.OutputName(0)
	must(t, err)
	if i, err := e.OutputIndex(outName); err != nil || i != 0 {
		t.Fatalf("output index %d %v", i, err)
	}
	if i, err := e.InputIndex("nope"); err != nil || i != -1 {
		t.Fatalf("input index %d %v", i, err)
	}
	w1, err := e.InputInfo(1)
	must(t, err)
	if w1.DType != Float32 || !reflect.DeepEqual(w1.Shape, []int64{8, 4}) || w1.DType.String() != "float32" {
		t.Fatalf("w1: %+v", w1)
	}

	y := runX(t, e)
	checkExpected(t, y)
	copied := make([]float32, 3)
	must(t, CopyOutput(e, 0, copied))
	view, err := OutputView[float32](e, 0)
	must(t, err)
	if !reflect.DeepEqual(copied, y) || !reflect.DeepEqual(view, y) {
		t.Fatalf("copy %v, view %v, output %v", copied, view, y)
	}
	t.Logf("output: %v", y)
	must(t, model.Close()) // the executor keeps the model alive
	checkExpected(t, runX(t, e))
}

func TestMemoryThenParams(t *testing.T) {
	graph, err := os.ReadFile(filepath.Join(mlp(t), "graph.json"))
	must(t, err)
	params, err := os.ReadFile(filepath.Join(mlp(t), "params.bin"))
	must(t, err)
	bare, err := LoadMemory(nil, graph, nil, kernels(t))
	must(t, err)
	e, err := bare.NewExecutor()
	must(t, err)
	defer e.Close()
	must(t, bare.Close())
	must(t, e.LoadParams(params))
	must(t, e.LoadParamsFile(filepath.Join(mlp(t), "params.bin")))
	checkExpected(t, runX(t, e))

	withParams, err := LoadMemory(nil, graph, params, kernels(t))
	must(t, err)
	defer withParams.Close()
	e2, err := withParams.NewExecutor()
	must(t, err)
	defer e2.Close()
	checkExpected(t, runX(t, e2))
}

func TestExecutorsOnGoroutines(t *testing.T) {
	model := load(t)
	defer model.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := model.NewExecutor()
			if err != nil {
				errs <- err
				return
			}
			defer e.Close()
			for i := 0; i < 20; i++ {
				if err := SetInput(e, 0, x, []int64{1, 4}); err != nil {
					errs <- err
					return
				}
				if err := e.Run(); err != nil {
					errs <- err
					return
				}
				y, _, err := Output[float32](e, 0)
				if err != nil {
					errs <- err
					return
				}
				for k := range y {
					if math.Abs(float64(y[k]-expected[k])) >= 2e-6 {
						errs <- newError(ErrUnknown, "output %v", y)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	dir := mlp(t)
	graphPath := filepath.Join(dir, "graph.json")
	paramsPath := filepath.Join(dir, "params.bin")
	_, err := LoadFiles(nil, graphPath, "/nonexistent/libkernels.so", paramsPath)
	expectError(t, err, ErrIO, "/nonexistent/libkernels.so")
	if err.Error() != "gexec error 14: "+err.(*Error).Message {
		t.Fatalf("Error() = %q", err.Error())
	}
	_, err = LoadFiles(nil, "/nonexistent/graph.json", kernels(t), "")
	expectError(t, err, ErrIO, "/nonexistent/graph.json")
	_, err = LoadMemory(nil, []byte(`{"nodes": [`), nil, kernels(t))
	expectError(t, err, ErrInvalidJSON, "")
	_, err = LoadMemory(nil, []byte(`{"nodes": 3}`), nil, kernels(t))
	expectError(t, err, ErrInvalidGraph, "nodes")
	graph, err := os.ReadFile(graphPath)
	must(t, err)
	_, err = LoadMemory(nil, graph, []byte("garbage"), kernels(t))
	expectError(t, err, ErrInvalidParams, "")

	model := load(t)
	defer model.Close()
	e, err := model.NewExecutor()
	must(t, err)
	// the C library refuses a dtype or a shape other than the input's
	expectError(t, SetInput(e, 0, []int32{0, 0, 0, 0}, []int64{1, 4}), ErrDtypeMismatch, `"x"`)
	expectError(t, SetInput(e, 0, make([]float32, 5), []int64{1, 5}), ErrShapeMismatch, `"x"`)
	expectError(t, SetInput(e, 7, x, []int64{1, 4}), ErrInvalidArgument, "input")
	// the binding refuses a slice that does not fill its shape
	expectError(t, SetInput(e, 0, x[:3], []int64{1, 4}), ErrInvalidArgument, "do not fill")
	// an unset input: Run refuses it, naming it
	expectError(t, e.Run(), ErrInvalidArgument, `"x"`)
	must(t, SetInput(e, 0, x, []int64{1, 4}))
	must(t, e.Run())
	expectError(t, CopyOutput(e, 0, make([]float32, 2)), ErrInvalidArgument, "too small")
	expectError(t, CopyOutput(e, 0, make([]int32, 3)), ErrDtypeMismatch, "float32")
	_, _, err = Output[float64](e, 0)
	expectError(t, err, ErrDtypeMismatch, "float32")
	_, err = OutputView[int64](e, 0)
	expectError(t, err, ErrDtypeMismatch, "float32")
	_, err = e.OutputInfo(1)
	expectError(t, err, ErrInvalidArgument, "output index 1")
	expectError(t, e.LoadParams([]byte("garbage")), ErrInvalidParams, "")
	must(t, e.Run()) // a failed load left the parameters
	y, _, err := Output[float32](e, 0)
	must(t, err)
	checkExpected(t, y)
	// use after Close is refused, not a crash
	must(t, e.Close())
	must(t, e.Close())
	expectError(t, e.Run(), ErrInvalidArgument, "executor is NULL")
	_, err = NewRuntime(-1)
	expectError(t, err, ErrInvalidArgument, "negative")
}
