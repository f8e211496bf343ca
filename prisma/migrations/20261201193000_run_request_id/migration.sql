-- The correlation id (X-Request-Id) of the HTTP request that made the run, so every worker
-- that executes it, on any gateway replica, sends it on with its executor calls. A column
-- on a table whose row-level security is already forced, so no policy changes.

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "request_id" TEXT;
