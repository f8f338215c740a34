// Package compose owns the files docker-compose.yml (at the repository root)
// mounts into its containers — the Temporal schema script and dynamic
// config — and loads that compose file with compose-go, the parser Docker
// Compose itself uses, so tests check the stack without a Docker engine.
package compose

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// FileName is the compose file at the repository root.
const FileName = "docker-compose.yml"

// Load parses, interpolates and validates repoRoot/docker-compose.yml the way
// `docker compose config` does, with env as the only environment (the
// calling process's is not read, so results do not depend on the machine).
func Load(ctx context.Context, repoRoot string, env map[string]string) (*types.Project, error) {
	var environment []string
	for k, v := range env {
		environment = append(environment, k+"="+v)
	}
	options, err := cli.NewProjectOptions([]string{filepath.Join(repoRoot, FileName)},
		cli.WithWorkingDirectory(repoRoot),
		cli.WithEnv(environment),
		cli.WithInterpolation(true),
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: options: %w", FileName, err)
	}
	project, err := options.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	return project, nil
}
