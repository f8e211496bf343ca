/**
 * Classes (the first key) of the transaction-scoped advisory locks Runbox takes, so two
 * features never contend for, or release, each other's locks. The second key is
 * hashtext(tenant id): two tenants that hash alike only wait for each other, never mix.
 */
export const ADVISORY_LOCK = {
  /** Creating sessions and runs: held while a tenant's quota is checked and used. */
  tenantQuota: 0x52420001,
  /** Creating sandboxes: held while the executor counts a tenant's live containers. */
  tenantSandboxes: 0x52420002,
} as const;
