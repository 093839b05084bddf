package kit

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"
)

// NamedParams returns the weights of vs by name, sorted: the order of an
// optimizer's state and of checkpoints.
func NamedParams(vs *nn.VarStore) []ts.NamedTensor {
	names := slices.Sorted(maps.Keys(vs.Variables()))
	out := make([]ts.NamedTensor, len(names))
	for i, name := range names {
		p, _ := vs.Root().Get(name)
		out[i] = ts.NamedTensor{Name: name, Tensor: p}
	}
	return out
}

// SplitNamed returns the names and the tensors of named tensors, in order
// (what NewAdam takes).
func SplitNamed(named []ts.NamedTensor) ([]string, []*ts.Tensor) {
	names, tensors := make([]string, len(named)), make([]*ts.Tensor, len(named))
	for i, nt := range named {
		names[i], tensors[i] = nt.Name, nt.Tensor
	}
	return names, tensors
}

// LoadWeights copies the tensors saved in path (SaveTensors) onto device
// into the weights of the same names, which must be exactly the saved ones,
// of the same shapes.
func LoadWeights(path string, device gotch.Device, weights []ts.NamedTensor) error {
	saved, err := LoadTensors(path, device)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	defer DropTensors(saved)
	byName := map[string]*ts.Tensor{}
	for _, nt := range saved {
		byName[nt.Name] = nt.Tensor
	}
	if len(saved) != len(byName) || len(byName) != len(weights) {
		return fmt.Errorf("%s: %d weights, the model has %d", filepath.Base(path), len(saved), len(weights))
	}
	for _, w := range weights {
		src, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("%s: no weight %q", filepath.Base(path), w.Name)
		}
		if err := CopyInto(w.Tensor, src); err != nil {
			return fmt.Errorf("%s: weight %q: %w", filepath.Base(path), w.Name, err)
		}
	}
	return nil
}

// SaveTensors writes named tensors in libtorch's format, atomically.
func SaveTensors(named []ts.NamedTensor, path string) error {
	tmp := path + ".tmp"
	if err := ts.SaveMultiNew(named, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadTensors reads tensors saved by SaveTensors onto device; the caller
// drops them (DropTensors).
func LoadTensors(path string, device gotch.Device) ([]ts.NamedTensor, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err // libtorch's message for a missing file is obscure
	}
	named, err := ts.LoadMultiWithDevice(path, device)
	if err != nil {
		return nil, err
	}
	if len(named) == 0 {
		return nil, errors.New("no tensors")
	}
	return named, nil
}

// DropTensors frees loaded tensors.
func DropTensors(named []ts.NamedTensor) {
	for _, nt := range named {
		_ = nt.Tensor.Drop()
	}
}
