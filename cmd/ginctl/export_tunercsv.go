package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/promsd"
	"github.com/gin-topology/gin/internal/tunercsv"
)

// exportTunerCSV writes the job's pinned plan as the config of NVIDIA's
// example NCCL tuner (NCCL_TUNER_CONFIG_FILE): the plan is read as
// `ginctl plan --job` reads it (GetPlan), rendered by tunercsv, and
// written to stdout or, with --out, atomically to a file.
func (a *app) exportTunerCSV(ctx context.Context, job, out string) error {
	if job == "" {
		return usagef("nccl-tuner-csv needs --job (the job whose pinned plan to write)")
	}
	var p *ginv1.Plan
	err := a.withPlans(ctx, func(ctx context.Context, pc ginv1.PlanServiceClient) error {
		got, err := pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: job, Consistency: a.consistency()})
		if status.Code(err) == codes.NotFound {
			return status.Errorf(codes.NotFound, "job %q has no plan (ginctl plan --job %s --nodes LIST creates one)", job, job)
		}
		p = got.GetPlan()
		return err
	})
	if err != nil {
		return err
	}
	b, err := tunercsv.Render(p, tunercsv.Options{Generator: "ginctl " + buildinfo.String()})
	if err != nil {
		return fmt.Errorf("nccl-tuner-csv: job %s: %w", job, err)
	}
	if out == "" || out == "-" {
		_, err = a.stdout.Write(b)
		return err
	}
	return writeFileAtomic(out, b)
}

// writeFileAtomic replaces path with b through a temporary file and a
// rename (promsd.WriteFile, which the prometheus-sd export uses too), so
// a reader (a job starting) sees the old file or the new one, never a
// part.
func writeFileAtomic(path string, b []byte) error {
	if err := promsd.WriteFile(path, b); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}
