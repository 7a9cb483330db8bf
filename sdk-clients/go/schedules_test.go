package waymark_test

import (
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

func TestSchedules(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, name := newQueue(t, c), unique("sched")
	spec := waymark.ScheduleSpec{Cron: "0 0 * * * *", TimeZone: "Europe/Berlin", WorkflowName: "noworker", Input: map[string]int{"n": 1}, Queue: queue, Paused: true}
	s, err := c.CreateSchedule(ctx, name, spec)
	if err != nil || !s.Paused || !s.NextFireTime.IsZero() || string(s.Input) != `{"n":1}` {
		t.Fatalf("create: %+v %v", s, err)
	}
	if _, err := c.CreateSchedule(ctx, name, spec); !waymark.IsReason(err, "SCHEDULE_EXISTS") {
		t.Fatalf("create twice: %v", err)
	}
	s, err = c.UpdateSchedule(ctx, name, waymark.ScheduleSpec{Cron: "0 30 * * * *"}, waymark.FieldCron)
	if err != nil || s.Cron != "0 30 * * * *" || s.TimeZone != "Europe/Berlin" {
		t.Fatalf("update: %+v %v", s, err)
	}
	if s, err = c.ResumeSchedule(ctx, name); err != nil || s.Paused || s.NextFireTime.IsZero() {
		t.Fatalf("resume: %+v %v", s, err)
	}
	if s, err = c.PauseSchedule(ctx, name); err != nil || !s.Paused {
		t.Fatalf("pause: %+v %v", s, err)
	}
	first, err := c.TriggerSchedule(ctx, name, "r1")
	if err != nil || !first.Created || first.Queue != queue {
		t.Fatalf("trigger: %+v %v", first, err)
	}
	again, err := c.TriggerSchedule(ctx, name, "r1")
	if err != nil || again.Created || again.ID != first.ID {
		t.Fatalf("trigger again: %+v %v", again, err)
	}
	end := time.Now().Add(-time.Minute)
	runs, err := c.BackfillSchedule(ctx, name, end.Add(-3*time.Hour), end)
	if err != nil || len(runs) != 3 || !runs[0].Created {
		t.Fatalf("backfill: %+v %v", runs, err)
	}
	if runs, err = c.BackfillSchedule(ctx, name, end.Add(-3*time.Hour), end); err != nil || runs[0].Created {
		t.Fatalf("backfill again: %+v %v", runs, err)
	}
	if got, err := c.GetSchedule(ctx, name); err != nil || got.Name != name {
		t.Fatalf("get: %+v %v", got, err)
	}
	all, err := c.ListSchedules(ctx)
	if err != nil || len(all) == 0 {
		t.Fatalf("list: %v %v", all, err)
	}
	if err := c.DeleteSchedule(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, name); !waymark.IsReason(err, "SCHEDULE_NOT_FOUND") {
		t.Fatalf("get after delete: %v", err)
	}
}
