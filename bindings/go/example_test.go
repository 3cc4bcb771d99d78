package gexec_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gexec"
)

// Runs gexec's bundled MLP (examples/mlp); GEXEC_SOURCE_DIR and GEXEC_TEST_KERNELS name
// the source tree and the kernel library.
func Example() {
	dir := filepath.Join(os.Getenv("GEXEC_SOURCE_DIR"), "examples", "mlp")
	kernels := os.Getenv("GEXEC_TEST_KERNELS")

	// The model: graph, kernels and parameters; nil is the process's default runtime.
	model, err := gexec.LoadFiles(nil, filepath.Join(dir, "graph.json"), kernels, filepath.Join(dir, "params.bin"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer model.Close()
	ex, err := model.NewExecutor() // one per goroutine; many per model
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ex.Close()

	x, _ := ex.InputIndex("x") // -1: no such input
	if err := gexec.SetInput(ex, x, []float32{0.5, -1, 2, 0.25}, []int64{1, 4}); err != nil {
		fmt.Println(err)
		return
	}
	if err := ex.Run(); err != nil {
		fmt.Println(err)
		return
	}
	y, shape, err := gexec.Output[float32](ex, 0) // a copy; OutputView aliases it instead
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v %.6f\n", shape, y)

	// Errors are *gexec.Error values with the C status's code and message.
	err = gexec.SetInput(ex, x, []int32{1, 2, 3, 4}, []int64{1, 4})
	var e *gexec.Error
	if errors.As(err, &e) && e.Code == gexec.ErrDtypeMismatch {
		fmt.Println("refused:", e.Message)
	}
	// Output:
	// [1 3] [0.400786 0.336452 0.262762]
	// refused: gexec: dtype_mismatch: set_input "x": dtype is int32, expected float32
}
