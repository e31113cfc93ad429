/**
 * The embedded Better IAM, assembled: one context (context.ts) shared by the areas under `areas/`,
 * each giving its part of the service and its routes. Service functions are trusted (code calls them
 * after deciding); the HTTP routes in `handler.ts` decide every call with `iam:*` actions before
 * calling them.
 *
 * Every change runs in one transaction that also queues its change notification, and drops the
 * cache entries it touches right after the commit, before the function returns: a revoked key,
 * session or binding is refused on the very next call.
 */
import type { CreateIamOptions, Iam, IamInternals } from './api.js';
import { apiKeyRoutes, apiKeyService } from './areas/api-keys.js';
import { authenticate } from './areas/authenticate.js';
import { authorize, authorizeRoutes } from './areas/authorize.js';
import { bindingRoutes, bindingService } from './areas/bindings.js';
import { bootstrapService } from './areas/bootstrap.js';
import { delegationRoutes, delegationService } from './areas/delegations.js';
import { passwordRoutes, passwordService } from './areas/passwords.js';
import { principalRoutes, principalService } from './areas/principals.js';
import { meterService } from './areas/meters.js';
import { recoveryAuditService } from './areas/recovery-audit.js';
import { installActions, roleRoutes, roleService } from './areas/roles.js';
import { secondFactorRoutes, secondFactorService } from './areas/second-factor.js';
import { sessionRoutes, sessionService } from './areas/sessions.js';
import { tenantRoutes, tenantService, tenantState } from './areas/tenants.js';
import { createContext } from './context.js';
import { createIamHandler } from './handler.js';
import { iamMigrations } from './migrations.js';
import type { RouteBindings } from './routes.js';

/** Every route of `methods.ts`, from the area that serves it (a missing one does not compile). */
function routesOf(iam: Iam, internals: IamInternals): RouteBindings {
  return {
    ...sessionRoutes(iam, internals.now),
    ...secondFactorRoutes(iam),
    ...passwordRoutes(iam),
    ...apiKeyRoutes(iam),
    ...tenantRoutes(iam),
    ...principalRoutes(iam),
    ...roleRoutes(iam),
    ...bindingRoutes(iam),
    ...delegationRoutes(iam),
    ...authorizeRoutes(iam),
  };
}

/** Creates the embedded IAM over a database whose `iam` migrations have run. */
export function createIam(options: CreateIamOptions): Iam {
  const ctx = createContext(options);
  let handle: ReturnType<typeof createIamHandler> | undefined;
  const iam: Iam = {
    bridge: {
      authenticate: (credential) => authenticate(ctx, credential),
      tenantState: (tenantId) => tenantState(ctx, tenantId),
      authorize: (identity, checks) => authorize(ctx, identity, checks),
      installActions: (catalog) => installActions(ctx, catalog),
      delegationState: (id) => iam.delegationState(id),
    },
    handler(request, client) {
      handle ??= createIamHandler(iam, routesOf(iam, internals), internals);
      return handle(request, client);
    },
    migrations: iamMigrations,
    ready: () => ctx.feed.start(),
    authenticate: (credential) => authenticate(ctx, credential),
    authorize: (identity, checks) => authorize(ctx, identity, checks),
    ...tenantService(ctx),
    ...principalService(ctx),
    ...sessionService(ctx),
    ...secondFactorService(ctx),
    ...passwordService(ctx),
    ...recoveryAuditService(ctx),
    ...meterService(ctx),
    ...apiKeyService(ctx),
    ...roleService(ctx),
    ...bindingService(ctx),
    ...delegationService(ctx),
    ...bootstrapService(ctx),
    async close() {
      await ctx.lastUsed.close();
      await ctx.feed.close();
    },
  };
  const internals: IamInternals = {
    trustedOrigins: options.trustedOrigins,
    limiter: options.limiter,
    limits: ctx.limits,
    now: ctx.clock,
    log: options.log,
  };
  return iam;
}
