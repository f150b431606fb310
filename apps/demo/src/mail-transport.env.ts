import {
  EmlFileTransport,
  type MailTransport,
  PostmarkMailTransport,
  ResendMailTransport,
  SesMailTransport,
} from '@reliable-mail/nestjs';

/** A provider transport the environment chose, and how the start-up log names it. */
export interface ProviderChoice {
  transport: MailTransport;
  description: string;
}

type Env = Record<string, string | undefined>;

function required(env: Env, name: string, transport: string): string {
  const value = env[name]?.trim();
  if (!value) throw new Error(`MAIL_TRANSPORT=${transport} needs ${name}`);
  return value;
}

const optional = (env: Env, name: string) => env[name]?.trim() || undefined;

/** `http://127.0.0.1:8080` as Postmark's `useHttps` and `requestHost`: a local stand-in, or another API host. */
function postmarkHost(url: string | undefined): { useHttps?: boolean; requestHost?: string } {
  if (!url) return {};
  const parsed = new URL(url);
  return { useHttps: parsed.protocol === 'https:', requestHost: parsed.host };
}

/**
 * The provider the demo sends through, from `MAIL_TRANSPORT` (`smtp`, the default, `ses`, `postmark`, `resend`, or
 * `file`: .eml files in `MAIL_DIR`, no server) and the provider's own variables; null for SMTP (`SMTP_URL`, or the
 * capture server).
 */
export function providerFromEnv(env: Env): ProviderChoice | null {
  const kind = optional(env, 'MAIL_TRANSPORT') ?? 'smtp';
  switch (kind) {
    case 'smtp':
      return null;
    case 'ses': {
      const region = required(env, 'AWS_REGION', kind);
      const endpoint = optional(env, 'SES_ENDPOINT');
      return {
        // Credentials come from the AWS SDK's own chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, a role.
        transport: new SesMailTransport({
          region,
          endpoint,
          configurationSetName: optional(env, 'SES_CONFIGURATION_SET'),
        }),
        description: `Amazon SES in ${region}${endpoint ? ` at ${endpoint}` : ''} (MAIL_TRANSPORT=ses)`,
      };
    }
    case 'postmark': {
      const apiUrl = optional(env, 'POSTMARK_API_URL');
      return {
        transport: new PostmarkMailTransport({
          serverToken: required(env, 'POSTMARK_SERVER_TOKEN', kind),
          messageStream: optional(env, 'POSTMARK_MESSAGE_STREAM'),
          ...postmarkHost(apiUrl),
        }),
        description: `Postmark${apiUrl ? ` at ${apiUrl}` : ''} (MAIL_TRANSPORT=postmark)`,
      };
    }
    case 'resend': {
      const baseUrl = optional(env, 'RESEND_BASE_URL');
      return {
        transport: new ResendMailTransport({ apiKey: required(env, 'RESEND_API_KEY', kind), baseUrl }),
        description: `Resend${baseUrl ? ` at ${baseUrl}` : ''} (MAIL_TRANSPORT=resend)`,
      };
    }
    case 'file': {
      const directory = optional(env, 'MAIL_DIR') ?? '.data/demo-mail';
      return {
        transport: new EmlFileTransport({ directory }),
        description: `.eml files in ${directory} (MAIL_TRANSPORT=file)`,
      };
    }
    default:
      throw new Error(`MAIL_TRANSPORT must be smtp, ses, postmark, resend or file, got ${JSON.stringify(kind)}`);
  }
}
