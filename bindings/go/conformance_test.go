// TVM-compiled conformance models through the binding, compared with TVM's own outputs bit
// for bit: GEXEC_CONFORMANCE_DIR (the test command's build/conformance, made by TVM) holds,
// per model, the single-file library model.so, TVM's inputs.bin and outputs.bin (TVM's
// parameter format: the inputs by name, the outputs named by their index). Models whose
// files are not there are reported and left out; with no GEXEC_CONFORMANCE_DIR the test is
// skipped, saying why.
package gexec

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

type blobTensor struct {
	shape []int64
	data  []float32
}

// readBlob reads the float32 tensors of a TVM parameter blob by name, as TVM's
// save_param_dict writes them (little-endian).
func readBlob(t *testing.T, path string) map[string]blobTensor {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	u64 := func() uint64 {
		v := binary.LittleEndian.Uint64(b[at:])
		at += 8
		return v
	}
	if u64() != 0xF7E58D4F05049CB7 {
		t.Fatalf("%s: not a TVM parameter blob", path)
	}
	u64() // reserved
	names := make([]string, u64())
	for i := range names {
		n := int(u64())
		names[i] = string(b[at : at+n])
		at += n
	}
	if int(u64()) != len(names) {
		t.Fatalf("%s: names and tensors differ in number", path)
	}
	out := map[string]blobTensor{}
	for _, name := range names {
		if u64() != 0xDD5E40F096B4A13F {
			t.Fatalf("%s: tensor %q: bad magic", path, name)
		}
		u64()   // reserved
		at += 8 // device
		ndim := int(int32(binary.LittleEndian.Uint32(b[at:])))
		code, bits := b[at+4], b[at+5]
		at += 8
		shape := make([]int64, ndim)
		for i := range shape {
			shape[i] = int64(u64())
		}
		n := int(u64())
		if code != 2 || bits != 32 {
			t.Fatalf("%s: tensor %q is not float32", path, name)
		}
		data := make([]float32, n/4)
		for i := range data {
			data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[at+4*i:]))
		}
		at += n
		out[name] = blobTensor{shape, data}
	}
	return out
}

func TestConformanceModelsBitForBit(t *testing.T) {
	dir := os.Getenv("GEXEC_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("GEXEC_CONFORMANCE_DIR is not set (the test command sets it to the TVM-compiled models)")
	}
	compared := 0
	for _, model := range []string{"mlp", "resnet", "mobilenet"} {
		d := filepath.Join(dir, model)
		if _, err := os.Stat(filepath.Join(d, "outputs.bin")); err != nil {
			t.Logf("%s: no TVM-compiled files in %s, left out", model, d)
			continue
		}
		m, err := LoadLibrary(nil, filepath.Join(d, "model.so"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := m.NewExecutor()
		if err != nil {
			t.Fatal(err)
		}
		for name, in := range readBlob(t, filepath.Join(d, "inputs.bin")) {
			index, err := e.InputIndex(name)
			if err != nil || index < 0 {
				t.Fatalf("%s: no input %q (%v)", model, name, err)
			}
			if err := SetInput(e, index, in.data, in.shape); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Run(); err != nil {
			t.Fatal(err)
		}
		expected := readBlob(t, filepath.Join(d, "outputs.bin"))
		for name, want := range expected {
			i, _ := strconv.Atoi(name)
			got, shape, err := Output[float32](e, i)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(shape, want.shape) || len(got) != len(want.data) {
				t.Fatalf("%s output %d: shape %v, TVM's %v", model, i, shape, want.shape)
			}
			for k := range got {
				if math.Float32bits(got[k]) != math.Float32bits(want.data[k]) {
					t.Fatalf("%s output %d: element %d is %g, TVM's %g", model, i, k, got[k], want.data[k])
				}
			}
		}
		t.Logf("%s: %d output(s) bit for bit as TVM's", model, len(expected))
		compared++
		e.Close()
		m.Close()
	}
	t.Logf("%d TVM-compiled model(s) compared", compared)
}
