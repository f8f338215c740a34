package packer

import (
	"fmt"
	"math"

	"github.com/millwright/millwright/model/scheduling"
)

// coverLP solves the covering linear program
//
//	minimise Σ_j price_j·x_j  subject to  Σ_j a_ij·x_j ≥ b_i (every row i),  x ≥ 0
//
// with a revised simplex (big-M start, Dantzig pricing). Rows are few (one
// per resource dimension), columns many (one per instance type), so the
// basis is a tiny dense matrix. It returns the optimum and the dual price
// of one unit of each row: the marginal $/h of a millicore, a byte, a pod
// slot. The packer values pods with these duals; the optimum is the
// LP-relaxation lower bound on a plan's price.
//
// Hand-written because the problem is tiny and hot (re-solved as demand
// shrinks); a general LP library would cost more to set up than to solve.
func coverLP(prices []float64, cols [][]float64, b []float64) (obj float64, duals []float64, ok bool) {
	m := len(b)
	n := len(prices)
	if m == 0 {
		return 0, nil, true
	}
	// Scale rows so every demand is 1: keeps bytes and millicores comparable.
	a := func(i, j int) float64 { return cols[j][i] / b[i] }
	bigM := 1.0
	for _, p := range prices {
		bigM = math.Max(bigM, p)
	}
	bigM *= 1e6
	// Column ids: 0..n-1 real, n..n+m-1 surplus (−e_i), n+m..n+2m-1 artificial (+e_i).
	colVec := func(j int, out []float64) {
		for i := range out {
			out[i] = 0
		}
		switch {
		case j < n:
			for i := 0; i < m; i++ {
				out[i] = a(i, j)
			}
		case j < n+m:
			out[j-n] = -1
		default:
			out[j-n-m] = 1
		}
	}
	cost := func(j int) float64 {
		switch {
		case j < n:
			return prices[j]
		case j < n+m:
			return 0
		default:
			return bigM
		}
	}
	basis := make([]int, m)
	binv := make([][]float64, m)
	xb := make([]float64, m)
	for i := 0; i < m; i++ {
		basis[i] = n + m + i
		binv[i] = make([]float64, m)
		binv[i][i] = 1
		xb[i] = 1
	}
	y := make([]float64, m)
	col := make([]float64, m)
	d := make([]float64, m)
	const eps = 1e-12
	for iter := 0; iter < 50*m+100; iter++ {
		for k := 0; k < m; k++ {
			s := 0.0
			for i := 0; i < m; i++ {
				s += cost(basis[i]) * binv[i][k]
			}
			y[k] = s
		}
		enter, best := -1, -1e-9
		for j := 0; j < n+m; j++ {
			var rc float64
			if j < n {
				rc = prices[j]
				for i := 0; i < m; i++ {
					rc -= y[i] * a(i, j)
				}
			} else {
				rc = y[j-n]
			}
			if rc < best*(1+1e-12) && rc < -1e-9*math.Max(1, math.Abs(cost(j))) {
				enter, best = j, rc
			}
		}
		if enter < 0 {
			break
		}
		colVec(enter, col)
		for i := 0; i < m; i++ {
			s := 0.0
			for k := 0; k < m; k++ {
				s += binv[i][k] * col[k]
			}
			d[i] = s
		}
		leave, ratio := -1, math.Inf(1)
		for i := 0; i < m; i++ {
			if d[i] > eps {
				if r := xb[i] / d[i]; r < ratio {
					leave, ratio = i, r
				}
			}
		}
		if leave < 0 {
			return 0, nil, false // unbounded: cannot happen with positive prices
		}
		piv := d[leave]
		for k := 0; k < m; k++ {
			binv[leave][k] /= piv
		}
		xb[leave] /= piv
		for i := 0; i < m; i++ {
			if i == leave || d[i] == 0 {
				continue
			}
			f := d[i]
			for k := 0; k < m; k++ {
				binv[i][k] -= f * binv[leave][k]
			}
			xb[i] -= f * xb[leave]
		}
		basis[leave] = enter
	}
	for i, j := range basis {
		if j >= n+m && xb[i] > 1e-9 {
			return 0, nil, false // a row no column covers
		}
	}
	for k := 0; k < m; k++ {
		s := 0.0
		for i := 0; i < m; i++ {
			s += cost(basis[i]) * binv[i][k]
		}
		y[k] = s
	}
	duals = make([]float64, m)
	for i := 0; i < m; i++ {
		obj += y[i]
		duals[i] = math.Max(0, y[i]/b[i])
	}
	return obj, duals, true
}

// LowerBound returns the LP-relaxation lower bound on what launching nodes
// for the input's pods costs per hour: min Σ price·x subject to
// Σ allocatable·x ≥ the pods' total requests (cpu, memory, pods and any
// other resource they request), x ≥ 0, over every pool type at its
// cheapest available offering. It ignores every constraint but resources
// (and lets one node's cpu serve another's memory), so real plans cost
// more; it measures how close a plan is to the ideal.
func LowerBound(in Input) (float64, error) {
	p, err := newPacker(in)
	if err != nil {
		return 0, err
	}
	var demand scheduling.Resources
	for _, c := range p.classes {
		if c.err == nil {
			demand = demand.Add(c.req.Scale(int64(len(c.pods))))
		}
	}
	var dims []int
	for d, v := range demand {
		if v > 0 {
			dims = append(dims, d)
		}
	}
	var prices []float64
	var cols [][]float64
	for _, pt := range p.pts {
		best := -1
		for s := 0; s < p.nSlots; s++ {
			if pt.offered&(1<<s) != 0 && (best < 0 || pt.price[s] < pt.price[best]) {
				best = s
			}
		}
		if best < 0 || pt.price[best] <= 0 {
			continue
		}
		col := make([]float64, len(dims))
		for i, d := range dims {
			col[i] = float64(max(0, pt.it.Allocatable[d]))
		}
		prices = append(prices, pt.price[best])
		cols = append(cols, col)
	}
	b := make([]float64, len(dims))
	for i, d := range dims {
		b[i] = float64(demand[d])
	}
	obj, _, ok := coverLP(prices, cols, b)
	if !ok {
		return 0, fmt.Errorf("lower bound: some requested resource is offered by no instance type")
	}
	return obj, nil
}
