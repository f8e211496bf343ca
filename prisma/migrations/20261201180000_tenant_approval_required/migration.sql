-- Tools that count as changing state for every run of the tenant, whatever the run says:
-- approval_mode prompt asks before each call and deny refuses it. A column on a table
-- whose row-level security is already forced, so no policy changes.

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "approval_required" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[];
