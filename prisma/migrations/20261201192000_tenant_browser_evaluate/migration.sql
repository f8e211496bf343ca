-- Whether the browser tool may run script in the pages of this tenant (its evaluate action);
-- false unless an operator turns it on. A column on a table whose row-level security is
-- already forced, so no policy changes.

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "browser_evaluate" BOOLEAN NOT NULL DEFAULT false;
