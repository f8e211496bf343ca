-- Durable runs: a lease that says which gateway worker executes a run (another replica
-- takes over when it lapses), when the run was last queued, and per-call numbering and
-- approval deadlines.

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "dispatched_at" TIMESTAMPTZ(3),
ADD COLUMN     "lease_expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "lease_owner" TEXT,
ADD COLUMN     "recoveries" INTEGER NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "tool_calls" ADD COLUMN     "expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "seq" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "turn" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "started_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "tool_calls_status_expires_at_idx" ON "tool_calls"("status", "expires_at");
