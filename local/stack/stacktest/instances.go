package stacktest

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// PoolInstances are the emulator's instances launched for a NodePool (by
// the millwright.dev/nodepool tag), in any state, oldest first.
func PoolInstances(emulator *awsemu.Emulator, pool string) []awsemu.InstanceState {
	var out []awsemu.InstanceState
	for _, i := range emulator.State().Instances {
		if i.Tags[apisv1.TagNodePool] == pool {
			out = append(out, i)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].LaunchTime.Before(out[b].LaunchTime) })
	return out
}

// WaitInstanceState waits until the emulator's instance id is in state
// ("running", "terminated"...).
func WaitInstanceState(t testing.TB, emulator *awsemu.Emulator, id, state string, timeout time.Duration) {
	t.Helper()
	clustertesting.Eventually(t, timeout, "instance "+id+" "+state+" in the emulator", func(context.Context) (bool, error) {
		i, ok := emulator.State().Instance(id)
		return ok && i.State == state, nil
	})
}
