package packer

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// hostPort is a port a pod binds on its node's network.
type hostPort struct {
	ip       string // "" and 0.0.0.0: every address
	protocol corev1.Protocol
	port     int32
}

func (h hostPort) String() string {
	ip := h.ip
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s/%s:%d", h.protocol, ip, h.port)
}

// conflicts reports kube-scheduler's NodePorts rule: the same protocol and
// port, on the same address or on every address.
func (h hostPort) conflicts(o hostPort) bool {
	if h.port != o.port || h.protocol != o.protocol {
		return false
	}
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" }
	return h.ip == o.ip || wild(h.ip) || wild(o.ip)
}

// hostPorts are the host ports of one or more pods.
type hostPorts []hostPort

// podHostPorts lists the host ports a pod's containers (init containers
// included) bind; nil when none.
func podHostPorts(pod *corev1.Pod) hostPorts {
	var out hostPorts
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{ip: p.HostIP, protocol: proto, port: p.HostPort})
			}
		}
	}
	return out
}

// conflicts reports whether any port of a conflicts with one of b.
func (a hostPorts) conflicts(b hostPorts) (hostPort, bool) {
	for _, x := range a {
		for _, y := range b {
			if x.conflicts(y) {
				return x, true
			}
		}
	}
	return hostPort{}, false
}

// withoutDaemonSetPorts is mask without the slots where a DaemonSet pod
// binding one of c's host ports runs (a copy; masks are shared).
func (p *packer) withoutDaemonSetPorts(c *podClass, mask []uint64) []uint64 {
	out := mask
	copied := false
	for _, ds := range p.daemonSets {
		if _, bad := ds.ports.conflicts(c.ports); !bad {
			continue
		}
		if !copied {
			out = append([]uint64(nil), mask...)
			copied = true
		}
		for i := range out {
			out[i] &^= ds.mask[i]
		}
	}
	return out
}
