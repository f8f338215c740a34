package disruption

// The disruption methods, in the order Compute runs them. Each appends
// commands to c.commands and spends the pools' budgets.

func (c *computation) repair()                  {}
func (c *computation) drift()                   {}
func (c *computation) emptiness()               {}
func (c *computation) multiNodeConsolidation()  {}
func (c *computation) singleNodeConsolidation() {}
