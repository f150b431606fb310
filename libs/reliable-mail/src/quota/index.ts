export {
  QUOTA_DAY_MS,
  type QuotaLimits,
  type QuotaTake,
  SharedSendQuota,
  type SharedSendQuotaOptions,
  type SendQuotaState,
} from './shared-send-quota.js';
export { GRANT_TO_SEND_MS } from './quota-pace.js';
export type { QuotaShortfall } from '../outbox/sql/take-send-quota.js';
