/**
 * The settled horizon: every transaction of this database with a lower id has committed or aborted
 * for good, so rows written below it (events, audit entries) are final and none can appear there
 * later. Unlike PostgreSQL's snapshot xmin it ignores transactions of other databases on the same
 * cluster, which can never write this one's rows (migration compute/0004_settled_horizon).
 * Evaluated once per statement, as an uncorrelated subquery.
 */
import { sql } from 'kysely';

export const SETTLED_HORIZON = sql<string>`(select compute.settled_horizon())`;
