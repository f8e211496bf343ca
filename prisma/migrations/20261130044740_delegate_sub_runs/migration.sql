-- Sub-runs (delegate_task): the parent's tool call that made a sub-run, so a parent
-- resumed after a crash finds its sub-run instead of starting another, and how deeply
-- runs are nested (RUNBOX_DELEGATE_MAX_DEPTH).

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "depth" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "parent_call_id" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "runs_parent_run_id_parent_call_id_key" ON "runs"("parent_run_id", "parent_call_id");
