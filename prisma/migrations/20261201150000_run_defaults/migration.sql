-- Saved run defaults (toolset, tools, enabled, disabled, approval_mode, permissions,
-- limits) on tenants and API keys, and, on each run, where each of its effective options
-- came from (the run, its API key or its tenant). Columns on tables whose row-level
-- security is already forced, so no policy changes.

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "run_defaults" JSONB;

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "run_defaults" JSONB;

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "option_sources" JSONB;
