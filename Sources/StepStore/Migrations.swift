import Foundation
import SQLKit
import StepDatabase

/// One append-only schema step. Never edit a shipped migration; add a new one.
package struct Migration: Sendable {
    package let version: Int
    package let name: String
    /// Whether servers and workers of the builds before it may run on the schema once it is applied. Those that
    /// may not (they would write what the migration's new columns must follow without moving them) are refused at
    /// start-up from then on, through `schema_compatibility` (migration 28), which an older build reads though it
    /// knows nothing of the migration.
    package let mixes: Bool
    package let statements: @Sendable (DatabaseKind) -> [String]

    package init(
        version: Int, name: String, mixes: Bool = true, statements: @escaping @Sendable (DatabaseKind) -> [String]
    ) {
        self.version = version
        self.name = name
        self.mixes = mixes
        self.statements = statements
    }
}

/// The schema, in order. Columns use types both engines read the same way: BIGINT for integers and
/// instants (milliseconds since 1970), TEXT for strings, day numbers (days since 1970-01-01) for dates.
/// Every walker-scoped table's primary key and unique indexes include walker_id, so it can be sharded by walker
/// (docs/scale-out.md; ScaleOutSchemaTests checks it). The job queue is a local table keyed by job_id.
package enum Migrations {
    package static let all: [Migration] = [
        Migration(version: 1, name: "ingest foundation") { _ in
            [
                """
                CREATE TABLE walkers (
                    walker_id TEXT PRIMARY KEY,
                    created_at BIGINT NOT NULL,
                    last_tz TEXT,
                    last_submission_at BIGINT,
                    lifetime_steps BIGINT NOT NULL DEFAULT 0
                )
                """,
                """
                CREATE TABLE step_logs (
                    walker_id TEXT NOT NULL,
                    day BIGINT NOT NULL,
                    tz TEXT NOT NULL,
                    reported_count BIGINT NOT NULL,
                    accepted_count BIGINT,
                    status TEXT NOT NULL,
                    multiplier_permille BIGINT,
                    energy_credited BIGINT NOT NULL DEFAULT 0,
                    attested BIGINT NOT NULL DEFAULT 0,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, day)
                )
                """,
                """
                CREATE TABLE step_submissions (
                    walker_id TEXT NOT NULL,
                    submission_id TEXT NOT NULL,
                    day BIGINT NOT NULL,
                    source TEXT NOT NULL,
                    source_bundle_id TEXT NOT NULL,
                    step_count BIGINT NOT NULL,
                    span_start BIGINT NOT NULL,
                    span_end BIGINT NOT NULL,
                    received_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, submission_id)
                )
                """,
                "CREATE INDEX step_submissions_by_day ON step_submissions (walker_id, day, received_at)",
                """
                CREATE TABLE energy_ledger (
                    walker_id TEXT NOT NULL,
                    entry_id TEXT NOT NULL,
                    day BIGINT,
                    kind TEXT NOT NULL,
                    amount BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, entry_id)
                )
                """,
                """
                CREATE TABLE idempotency_keys (
                    walker_id TEXT NOT NULL,
                    idem_key TEXT NOT NULL,
                    request_hash TEXT NOT NULL,
                    state TEXT NOT NULL,
                    status BIGINT,
                    response_body TEXT,
                    created_at BIGINT NOT NULL,
                    lease_until BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, idem_key)
                )
                """,
                "CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at)",
                """
                CREATE TABLE rate_limits (
                    walker_id TEXT NOT NULL,
                    bucket TEXT NOT NULL,
                    window_start BIGINT NOT NULL,
                    hits BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, bucket)
                )
                """,
                """
                CREATE TABLE attestation_logs (
                    walker_id TEXT NOT NULL,
                    log_id TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    route TEXT NOT NULL,
                    verdict TEXT NOT NULL,
                    reasons TEXT NOT NULL,
                    token_id TEXT,
                    request_id TEXT,
                    PRIMARY KEY (walker_id, log_id)
                )
                """,
                "CREATE INDEX attestation_logs_by_age ON attestation_logs (created_at)",
                "CREATE INDEX attestation_logs_by_verdict ON attestation_logs (walker_id, verdict, created_at)",
                """
                CREATE TABLE review_queue (
                    walker_id TEXT NOT NULL,
                    entry_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    subject TEXT,
                    created_at BIGINT NOT NULL,
                    resolved_at BIGINT,
                    resolution TEXT,
                    PRIMARY KEY (walker_id, entry_id)
                )
                """,
                "CREATE INDEX review_queue_open ON review_queue (resolved_at, created_at)",
            ]
        },
        Migration(version: 2, name: "streak runs and service secrets") { _ in
            [
                // Maximal runs of consecutive attested days: an ingest reads and writes a bounded number of
                // them instead of the walker's whole history.
                """
                CREATE TABLE streak_runs (
                    walker_id TEXT NOT NULL,
                    end_day BIGINT NOT NULL,
                    start_day BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, end_day)
                )
                """,
                // Gaps and islands: consecutive days share day − row number.
                """
                INSERT INTO streak_runs (walker_id, end_day, start_day)
                SELECT walker_id, MAX(day), MIN(day) FROM (
                    SELECT walker_id, day, day - ROW_NUMBER() OVER (PARTITION BY walker_id ORDER BY day) AS island
                    FROM step_logs WHERE attested = 1
                ) attested_days
                GROUP BY walker_id, island
                """,
                // Secrets every instance on the database shares (the development signing key).
                """
                CREATE TABLE service_secrets (
                    name TEXT PRIMARY KEY,
                    secret TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
            ]
        },
        Migration(version: 3, name: "walker version") { _ in
            [
                // Bumped by every ingest that writes the walker's days, so a statement that read the day under
                // an older snapshot than the walker's lock can tell (PostgreSQL admission, see
                // StoreTransaction.admit).
                "ALTER TABLE walkers ADD COLUMN version BIGINT NOT NULL DEFAULT 0"
            ]
        },
        Migration(version: 4, name: "job queue and review decisions") { _ in
            [
                // The durable job queue (StepJobs). walker_id leads the key like every walker-scoped table;
                // jobs that belong to no walker (maintenance) use ''. A finished job's row is deleted.
                """
                CREATE TABLE jobs (
                    walker_id TEXT NOT NULL,
                    job_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    dedupe_key TEXT,
                    state TEXT NOT NULL,
                    run_at BIGINT NOT NULL,
                    attempts BIGINT NOT NULL DEFAULT 0,
                    max_attempts BIGINT NOT NULL,
                    lease_until BIGINT,
                    last_error TEXT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, job_id)
                )
                """,
                // At most one pending job per dedupe key: later enqueues coalesce into it.
                "CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs (walker_id, dedupe_key) WHERE state = 'pending'",
                "CREATE INDEX jobs_due ON jobs (state, run_at)",
                "CREATE INDEX jobs_by_id ON jobs (job_id)",
                // Periodic jobs: an instance enqueues a period's run only if it moves next_run_at forward first,
                // so one run per period happens across all instances.
                """
                CREATE TABLE job_schedules (
                    name TEXT PRIMARY KEY,
                    next_run_at BIGINT NOT NULL
                )
                """,
                // Review entries of a quarantined day name the day and collect their reasons; a decision keeps
                // its note. One open entry per walker × kind × day.
                "ALTER TABLE review_queue ADD COLUMN day BIGINT",
                "ALTER TABLE review_queue ADD COLUMN reasons TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE review_queue ADD COLUMN note TEXT",
                """
                CREATE UNIQUE INDEX review_queue_open_day ON review_queue (walker_id, kind, day)
                WHERE resolved_at IS NULL
                """,
                "CREATE INDEX review_queue_by_id ON review_queue (entry_id)",
                // The Energy a pending day showed the app, so `GET /walker` can report pending Energy.
                "ALTER TABLE step_logs ADD COLUMN provisional_energy BIGINT NOT NULL DEFAULT 0",
            ]
        },
        Migration(version: 5, name: "health records") { _ in
            [
                // Seed 002's health data: one record per walker × day (a later submission for the day replaces
                // its values). `day` is a day number like step_logs.day. Duration (s), calories (kcal) and distance
                // (m) may be decimals, so they are whole thousandths in BIGINT: both engines sum them exactly and
                // alike, which REAL / DOUBLE PRECISION sums would not promise.
                """
                CREATE TABLE health_records (
                    walker_id TEXT NOT NULL,
                    day BIGINT NOT NULL,
                    record_id TEXT NOT NULL,
                    steps BIGINT NOT NULL,
                    duration_milli BIGINT NOT NULL,
                    calories_milli BIGINT NOT NULL,
                    distance_milli BIGINT NOT NULL,
                    source TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, day)
                )
                """
            ]
        },
        Migration(version: 6, name: "health nonces and App Attest keys") { _ in
            [
                // Seed 002's one-time nonces, bound to the walker that fetched them. `used_at` is set once, by the
                // first submission that presents the nonce (a conditional update, so two requests never both win).
                // Kept a day past expiry, so a late use still hears "expired" rather than "invalid", then pruned.
                """
                CREATE TABLE health_nonces (
                    walker_id TEXT NOT NULL,
                    nonce TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT,
                    PRIMARY KEY (walker_id, nonce)
                )
                """,
                "CREATE INDEX health_nonces_by_expiry ON health_nonces (expires_at)",
                // A walker's registered App Attest keys: the public key from the attestation and the highest
                // assertion counter seen, advanced by compare-and-set. Key id and key are base64 text.
                """
                CREATE TABLE app_attest_keys (
                    walker_id TEXT NOT NULL,
                    key_id TEXT NOT NULL,
                    public_key TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    sign_count BIGINT NOT NULL,
                    receipt TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, key_id)
                )
                """,
            ]
        },
        Migration(version: 7, name: "allocations and walker events") { _ in
            [
                // What walkers spend Energy on (SPEC.md "Energy, allocations and refunds"). `depends_on` names
                // the pending days (day numbers, comma-separated) whose provisional credit funded part of it;
                // `pending_days` those of them not yet accepted. A rejected day sets `refund_due_at`.
                """
                CREATE TABLE allocations (
                    walker_id TEXT NOT NULL,
                    allocation_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    node_id TEXT NOT NULL,
                    points BIGINT NOT NULL,
                    status TEXT NOT NULL,
                    depends_on TEXT NOT NULL,
                    pending_days TEXT NOT NULL,
                    refund_due_at BIGINT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, allocation_id)
                )
                """,
                "CREATE INDEX allocations_by_time ON allocations (walker_id, created_at)",
                // A spend or a refund names its allocation.
                "ALTER TABLE energy_ledger ADD COLUMN allocation_id TEXT",
                // What the app is told (`GET /walker/events`, its stream, the webhook): a per-walker sequence,
                // assigned under the walker's lock, is the event's id and the readers' cursor.
                """
                CREATE TABLE walker_events (
                    walker_id TEXT NOT NULL,
                    seq BIGINT NOT NULL,
                    type TEXT NOT NULL,
                    data TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (walker_id, seq)
                )
                """,
            ]
        },
        Migration(version: 8, name: "jobs keyed by job id") { kind in
            // The job queue is generic: a job is found by its id alone (claim, heartbeat, complete, retry), and
            // maintenance jobs belong to no walker. The pending-dedupe index stays per walker, and `jobs_due`
            // serves the claim; the primary key replaces `jobs_by_id`.
            switch kind {
            case .postgres:
                [
                    "ALTER TABLE jobs DROP CONSTRAINT jobs_pkey",
                    "ALTER TABLE jobs ADD PRIMARY KEY (job_id)",
                    "DROP INDEX jobs_by_id",
                ]
            case .sqlite:
                // SQLite cannot change a table's primary key: the table is copied into a new one.
                [
                    """
                    CREATE TABLE jobs_by_job_id (
                        job_id TEXT PRIMARY KEY,
                        walker_id TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        dedupe_key TEXT,
                        state TEXT NOT NULL,
                        run_at BIGINT NOT NULL,
                        attempts BIGINT NOT NULL DEFAULT 0,
                        max_attempts BIGINT NOT NULL,
                        lease_until BIGINT,
                        last_error TEXT,
                        created_at BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL
                    )
                    """,
                    """
                    INSERT INTO jobs_by_job_id (job_id, walker_id, kind, payload, dedupe_key, state, run_at, attempts,
                        max_attempts, lease_until, last_error, created_at, updated_at)
                    SELECT job_id, walker_id, kind, payload, dedupe_key, state, run_at, attempts, max_attempts,
                        lease_until, last_error, created_at, updated_at
                    FROM jobs
                    """,
                    "DROP TABLE jobs",
                    "ALTER TABLE jobs_by_job_id RENAME TO jobs",
                    "CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs (walker_id, dedupe_key) WHERE state = 'pending'",
                    "CREATE INDEX jobs_due ON jobs (state, run_at)",
                ]
            }
        },
        Migration(version: 9, name: "due jobs in claim order") { _ in
            // A claim takes the oldest due jobs by (run_at, job_id). With `job_id` in the index the claim reads
            // the first `limit` entries and stops, on both engines; before, it sorted every due job on each
            // claim, so its cost grew with the backlog.
            [
                "DROP INDEX jobs_due",
                "CREATE INDEX jobs_due ON jobs (state, run_at, job_id)",
            ]
        },
        Migration(version: 10, name: "submissions keep their zone and gyroscope flag") { _ in
            // Reconciliation runs every ingest check again over the day's submissions (seed 001 [6a-ii]): the
            // time-zone jump, the offline cap from each arrival and the gyroscope flag need what each submission
            // claimed. Rows stored before this read as made in their day's zone, gyroscope seen.
            [
                "ALTER TABLE step_submissions ADD COLUMN tz TEXT",
                "ALTER TABLE step_submissions ADD COLUMN gyro_observed BIGINT",
                "CREATE INDEX step_submissions_by_arrival ON step_submissions (walker_id, received_at)",
            ]
        },
        Migration(version: 11, name: "attestation log status") { _ in
            // Every authenticated ingest call now writes a row, refusals included, and the review rule counts
            // the rows answered 422 (anti-cheat) only. Earlier ingest rows get the status their verdict and
            // reasons imply, so rejections inside the rule's 24 h window still count the same way after the
            // upgrade; a replay's status was not recorded and stays unknown.
            [
                "ALTER TABLE attestation_logs ADD COLUMN status BIGINT",
                """
                UPDATE attestation_logs SET status = CASE
                    WHEN verdict <> 'REJECTED' THEN 200
                    WHEN reasons LIKE 'APP_CHECK%' THEN 401
                    WHEN reasons LIKE '%SOURCE_NOT_WHITELISTED%' THEN 403
                    ELSE 422 END
                WHERE route IN ('/step/ingest', '/step/ingest:batch') AND verdict <> 'REPLAYED'
                """,
            ]
        },
        Migration(version: 12, name: "allocation draws and partial refunds") { _ in
            // An allocation names how much it drew from each pending day (`draws`, "day:points,…"), so the
            // day's accepted credit can be compared with it (seed 001 [6b]); `refund_points` are the uncovered
            // points waiting for their refund (of the `refund_days` that fell short), `refunded_points` those
            // given back. Rows made before keep `draws` empty (amounts unknown): an accepted day confirms them,
            // a rejected one refunds all their points, as before. Their refund state carries over.
            [
                "ALTER TABLE allocations ADD COLUMN draws TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE allocations ADD COLUMN refund_points BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE allocations ADD COLUMN refund_days TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE allocations ADD COLUMN refunded_points BIGINT NOT NULL DEFAULT 0",
                "UPDATE allocations SET refunded_points = points WHERE status = 'refunded'",
                """
                UPDATE allocations SET refund_points = points
                WHERE status = 'provisional' AND refund_due_at IS NOT NULL
                """,
            ]
        },
        Migration(version: 13, name: "challenge re-read requests") { _ in
            // The challenge re-read handshake (seed 000's follow-up, seed 001 [6a-i]): a request per walker × day
            // that reconciliation would have quarantined for a backwards count or a cross-source overlap, with its
            // one-time nonce, deadline and, once answered, the app's re-read as JSON text (evidence). At most one
            // open request per walker × day. A review entry opened because of a re-read keeps it (`reread`).
            [
                """
                CREATE TABLE step_rereads (
                    walker_id TEXT NOT NULL,
                    reread_id TEXT NOT NULL,
                    day BIGINT NOT NULL,
                    tz TEXT NOT NULL,
                    window_start BIGINT NOT NULL,
                    window_end BIGINT NOT NULL,
                    nonce TEXT NOT NULL,
                    deadline BIGINT NOT NULL,
                    state TEXT NOT NULL,
                    reasons TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    answered_at BIGINT,
                    answer TEXT,
                    outcome TEXT,
                    PRIMARY KEY (walker_id, reread_id)
                )
                """,
                "CREATE UNIQUE INDEX step_rereads_open_day ON step_rereads (walker_id, day) WHERE state = 'open'",
                "ALTER TABLE review_queue ADD COLUMN reread TEXT",
            ]
        },
        Migration(version: 14, name: "named operators and the admin audit") { kind in
            // Operator credentials with a role, kept as the SHA-256 digest of a random secret (the secret has 256
            // bits, so a fast digest is as strong as a slow one and lets the credential be found by an index); the
            // audit of every operator action, append-only: the engines refuse an UPDATE or DELETE of a row.
            let immutable: [String] =
                switch kind {
                case .sqlite:
                    [
                        """
                        CREATE TRIGGER admin_audit_no_update BEFORE UPDATE ON admin_audit
                        BEGIN SELECT RAISE(ABORT, 'admin_audit is append-only'); END
                        """,
                        """
                        CREATE TRIGGER admin_audit_no_delete BEFORE DELETE ON admin_audit
                        BEGIN SELECT RAISE(ABORT, 'admin_audit is append-only'); END
                        """,
                    ]
                case .postgres:
                    [
                        """
                        CREATE FUNCTION admin_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN RAISE EXCEPTION 'admin_audit is append-only'; END $$
                        """,
                        """
                        CREATE TRIGGER admin_audit_append_only BEFORE UPDATE OR DELETE ON admin_audit
                        FOR EACH ROW EXECUTE FUNCTION admin_audit_append_only()
                        """,
                    ]
                }
            return [
                """
                CREATE TABLE operators (
                    operator_id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    role TEXT NOT NULL,
                    secret_digest TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT
                )
                """,
                "CREATE UNIQUE INDEX operators_active_name ON operators (name) WHERE revoked_at IS NULL",
                "CREATE UNIQUE INDEX operators_by_secret ON operators (secret_digest)",
                """
                CREATE TABLE admin_audit (
                    audit_id TEXT PRIMARY KEY,
                    at BIGINT NOT NULL,
                    operator_id TEXT NOT NULL,
                    operator_name TEXT NOT NULL,
                    role TEXT NOT NULL,
                    action TEXT NOT NULL,
                    target TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    note TEXT
                )
                """,
                "CREATE INDEX admin_audit_by_time ON admin_audit (at, audit_id)",
            ] + immutable
        },
        Migration(version: 15, name: "the review desk: stake, claims, deciders, App Check presence") { _ in
            // The queue pages by keyset over these indexes (`GET /admin/reviews`), so a page costs the same however
            // deep it is: open entries oldest first or most at stake first, resolved ones latest first, and every
            // entry by either order. A quarantined day's entry keeps the Energy at stake (floor(reported ×
            // multiplier), set when it opens or gains a reason); entries from before get it from their day. An
            // entry names who holds its claim until when and who decided it; a submission whether its ingest
            // carried a verified App Check token (null for rows from before).
            [
                "ALTER TABLE review_queue ADD COLUMN energy_at_stake BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE review_queue ADD COLUMN claim_operator_id TEXT",
                "ALTER TABLE review_queue ADD COLUMN claim_operator TEXT",
                "ALTER TABLE review_queue ADD COLUMN claim_until BIGINT",
                "ALTER TABLE review_queue ADD COLUMN decided_by TEXT",
                """
                UPDATE review_queue SET energy_at_stake = COALESCE((
                    SELECT COALESCE(l.reported_count * l.multiplier_permille / 1000, l.provisional_energy)
                    FROM step_logs l WHERE l.walker_id = review_queue.walker_id AND l.day = review_queue.day), 0)
                WHERE kind = 'quarantined_day'
                """,
                """
                CREATE INDEX review_queue_open_by_age ON review_queue (created_at, entry_id)
                WHERE resolved_at IS NULL
                """,
                """
                CREATE INDEX review_queue_open_by_stake ON review_queue (energy_at_stake, created_at, entry_id)
                WHERE resolved_at IS NULL
                """,
                """
                CREATE INDEX review_queue_resolved_by_time ON review_queue (resolved_at, entry_id)
                WHERE resolved_at IS NOT NULL
                """,
                "CREATE INDEX review_queue_by_age ON review_queue (created_at, entry_id)",
                "CREATE INDEX review_queue_by_stake ON review_queue (energy_at_stake, created_at, entry_id)",
                "ALTER TABLE step_submissions ADD COLUMN app_check BIGINT",
            ]
        },
        Migration(version: 16, name: "walker suspension and decision counts") { _ in
            [
                // A suspended walker's ingests are refused (403 WALKER_SUSPENDED); nothing of theirs is deleted.
                "ALTER TABLE walkers ADD COLUMN suspended_at BIGINT",
                "ALTER TABLE walkers ADD COLUMN suspension_note TEXT",
                // Decisions by operator and outcome, counted from the audit at scrape time on every instance.
                "CREATE INDEX admin_audit_by_action ON admin_audit (action, operator_name, outcome)",
            ]
        },
        Migration(version: 17, name: "console sessions and the audit's filters") { _ in
            // A console session is a random cookie value kept as its SHA-256 digest, like an operator's secret;
            // `operator_id` is an operator's id or `bootstrap` (the admin.token signed in), so it has no foreign
            // key. The audit is read newest first, filtered by operator name or by action.
            [
                """
                CREATE TABLE operator_sessions (
                    session_digest TEXT PRIMARY KEY,
                    operator_id TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    revoked_at BIGINT
                )
                """,
                "CREATE INDEX operator_sessions_by_operator ON operator_sessions (operator_id)",
                "CREATE INDEX admin_audit_by_operator ON admin_audit (operator_name, at, audit_id)",
                "CREATE INDEX admin_audit_by_action_time ON admin_audit (action, at, audit_id)",
            ]
        },
        Migration(version: 18, name: "one running job per walker and kind") { _ in
            // A claim passes over a due job while a job of the same walker and kind runs (`JobQueue.claim`), so
            // two worker slots never wait on each other for one walker's lock; the running jobs are few.
            ["CREATE INDEX jobs_running_walker ON jobs (walker_id, kind) WHERE state = 'running'"]
        },
        Migration(version: 19, name: "submissions and attestation rows keyed by their id first") { kind in
            // Their ids are time-ordered (`StoreTransactionID.make`), so with the id first each new row of every
            // walker goes to the key's last leaf, shared by a whole commit, instead of a leaf of the walker's own:
            // an ingest writes five b-tree leaves of its own instead of seven (docs/benchmarks.md). Every lookup
            // names both columns or goes through the walker's indexes (`by_day`, `by_arrival`, `by_verdict`), and
            // the key still holds walker_id (docs/scale-out.md).
            switch kind {
            case .postgres:
                [
                    """
                    ALTER TABLE step_submissions DROP CONSTRAINT step_submissions_pkey,
                        ADD PRIMARY KEY (submission_id, walker_id)
                    """,
                    """
                    ALTER TABLE attestation_logs DROP CONSTRAINT attestation_logs_pkey,
                        ADD PRIMARY KEY (log_id, walker_id)
                    """,
                ]
            case .sqlite:
                // SQLite cannot change a table's primary key: each table is copied into a new one, its columns in
                // the order they have now.
                [
                    """
                    CREATE TABLE step_submissions_by_id (
                        walker_id TEXT NOT NULL,
                        submission_id TEXT NOT NULL,
                        day BIGINT NOT NULL,
                        source TEXT NOT NULL,
                        source_bundle_id TEXT NOT NULL,
                        step_count BIGINT NOT NULL,
                        span_start BIGINT NOT NULL,
                        span_end BIGINT NOT NULL,
                        received_at BIGINT NOT NULL,
                        tz TEXT,
                        gyro_observed BIGINT,
                        app_check BIGINT,
                        PRIMARY KEY (submission_id, walker_id)
                    )
                    """,
                    """
                    INSERT INTO step_submissions_by_id (walker_id, submission_id, day, source, source_bundle_id,
                        step_count, span_start, span_end, received_at, tz, gyro_observed, app_check)
                    SELECT walker_id, submission_id, day, source, source_bundle_id, step_count, span_start, span_end,
                        received_at, tz, gyro_observed, app_check
                    FROM step_submissions ORDER BY submission_id, walker_id
                    """,
                    "DROP TABLE step_submissions",
                    "ALTER TABLE step_submissions_by_id RENAME TO step_submissions",
                    "CREATE INDEX step_submissions_by_day ON step_submissions (walker_id, day, received_at)",
                    "CREATE INDEX step_submissions_by_arrival ON step_submissions (walker_id, received_at)",
                    """
                    CREATE TABLE attestation_logs_by_id (
                        walker_id TEXT NOT NULL,
                        log_id TEXT NOT NULL,
                        created_at BIGINT NOT NULL,
                        route TEXT NOT NULL,
                        verdict TEXT NOT NULL,
                        reasons TEXT NOT NULL,
                        token_id TEXT,
                        request_id TEXT,
                        status BIGINT,
                        PRIMARY KEY (log_id, walker_id)
                    )
                    """,
                    """
                    INSERT INTO attestation_logs_by_id (walker_id, log_id, created_at, route, verdict, reasons,
                        token_id, request_id, status)
                    SELECT walker_id, log_id, created_at, route, verdict, reasons, token_id, request_id, status
                    FROM attestation_logs ORDER BY log_id, walker_id
                    """,
                    "DROP TABLE attestation_logs",
                    "ALTER TABLE attestation_logs_by_id RENAME TO attestation_logs",
                    "CREATE INDEX attestation_logs_by_age ON attestation_logs (created_at)",
                    "CREATE INDEX attestation_logs_by_verdict ON attestation_logs (walker_id, verdict, created_at)",
                ]
            }
        },
        Migration(version: 20, name: "console sessions bound to the admin.token that opened them") { _ in
            // A bootstrap session holds a digest derived from the admin.token it signed in with
            // (`BearerSecret.sessionBinding`) and ends when the configured token is another: changing a leaked
            // token must end the sessions opened with it. Bootstrap sessions from before have none and end too.
            ["ALTER TABLE operator_sessions ADD COLUMN credential_binding TEXT"]
        },
        Migration(
            version: 21, name: "each shortfall of an allocation refunded on its own grace period", mixes: false
        ) { _ in
            // The refund waiting on an allocation, one part per decision that left points uncovered, each with
            // its own due time (`RefundPart`): a second shortfall no longer pushes back the first one's refund.
            // `refund_points`, `refund_days` and `refund_due_at` stay their sum, their days and the earliest due
            // time; a row from before has one part, those three.
            ["ALTER TABLE allocations ADD COLUMN refund_parts TEXT NOT NULL DEFAULT ''"]
        },
        Migration(version: 22, name: "retention reads old submissions and events by age") { _ in
            // The hourly prune of `step_submissions` and `walker_events` looks for rows older than their
            // retention; their only indexes began with `walker_id`, so each batch read the whole table (past the
            // statement timeout once it grew, on PostgreSQL; holding SQLite's one writer meanwhile).
            [
                "CREATE INDEX step_submissions_by_age ON step_submissions (received_at)",
                "CREATE INDEX walker_events_by_age ON walker_events (created_at)",
            ]
        },
        Migration(version: 23, name: "what each decision covered of an allocation's draws") { _ in
            // `day:points` for each draw whose day has been decided since: what that decision's credit covered,
            // which a reversal of the day takes back exactly (`AllocationRecord.covered`). A draw decided before
            // has none, and a reversal works it out from the day's credit as before.
            ["ALTER TABLE allocations ADD COLUMN draws_covered TEXT NOT NULL DEFAULT ''"]
        },
        Migration(version: 24, name: "lifetime steps recomputed from the accepted counts", mixes: false) { _ in
            // A walker's lifetime steps are the sum of its days' accepted counts (each decision moves them by the
            // difference from the count accepted before; a reversal takes the day's off). Before this version a
            // re-read accepting below a day's earlier acceptance, then a reconcile of the day, could count part of
            // the day twice; this recomputes every walker whose total differs. The version moves with it, so an
            // instance's cached walker state is read again.
            [
                """
                UPDATE walkers SET
                    lifetime_steps = (SELECT COALESCE(SUM(accepted_count), 0) FROM step_logs
                        WHERE step_logs.walker_id = walkers.walker_id),
                    version = version + 1
                WHERE lifetime_steps <> (SELECT COALESCE(SUM(accepted_count), 0) FROM step_logs
                    WHERE step_logs.walker_id = walkers.walker_id)
                """
            ]
        },
        Migration(
            version: 25, name: "the Energy balance kept on the walker's row; open allocations indexed", mixes: false
        ) { _ in
            // The confirmed balance was the sum of the walker's ledger, read by every `GET /walker` and every
            // spend: a walker spending a point at a time grows it by thousands of rows a day. Each ledger entry now
            // moves `energy_balance` in the same transaction (the ledger stays the record it is the sum of), and
            // the provisional allocations a spend, a decision and a refund read are found without reading the
            // walker's settled ones. Literal `'provisional'`: a partial index serves only a query that names it.
            [
                "ALTER TABLE walkers ADD COLUMN energy_balance BIGINT NOT NULL DEFAULT 0",
                """
                UPDATE walkers SET energy_balance = (SELECT COALESCE(SUM(amount), 0) FROM energy_ledger
                    WHERE energy_ledger.walker_id = walkers.walker_id)
                """,
                """
                CREATE INDEX allocations_provisional ON allocations (walker_id, created_at, allocation_id)
                WHERE status = 'provisional'
                """,
            ]
        },
        Migration(version: 26, name: "a walker's unused health nonces indexed") { _ in
            // A nonce's issue counts the walker's live ones, which the primary key found among every nonce the
            // walker was issued in the day they are kept past expiry: a walker spending one a second with bogus
            // bodies made each count read tens of thousands of rows. Only unused nonces enter this index.
            ["CREATE INDEX health_nonces_live ON health_nonces (walker_id, expires_at) WHERE used_at IS NULL"]
        },
        Migration(
            version: 27, name: "what provisional allocations drew from each day, kept on the day's log", mixes: false
        ) { kind in
            // A spend read and decoded every provisional allocation of the walker to learn what earlier spends
            // drew from each pending day: a walker with thousands of them waiting on a quarantined day paid for
            // all of them at each spend (`scripts/bench-ledger 20000 100 provisional`: 65 times the spend of a
            // walker without them, on SQLite's writer). `energy_drawn` is what the provisional allocations that still wait on
            // the day drew from it: a spend adds its draws, the decision that settles the day's draws zeroes it.
            // The backfill sums the draws (`day:points,…`) of each provisional allocation whose pending days
            // (`day,…`) still name the day.
            let backfill =
                switch kind {
                case .postgres:
                    """
                    UPDATE step_logs SET energy_drawn = drawn.points
                    FROM (
                        SELECT a.walker_id, split_part(d.draw, ':', 1)::bigint AS day,
                            SUM(split_part(d.draw, ':', 2)::bigint) AS points
                        FROM allocations a CROSS JOIN LATERAL unnest(string_to_array(a.draws, ',')) AS d(draw)
                        WHERE a.status = 'provisional' AND a.draws <> ''
                            AND split_part(d.draw, ':', 1) = ANY (string_to_array(a.pending_days, ','))
                        GROUP BY a.walker_id, split_part(d.draw, ':', 1)::bigint
                    ) AS drawn
                    WHERE step_logs.walker_id = drawn.walker_id AND step_logs.day = drawn.day
                    """
                case .sqlite:
                    // `day:points,…` read as the JSON array `[[day,points],…]`; summed per walker and day first, so
                    // the allocations are read once however many days their walkers have.
                    """
                    WITH drawn AS (
                        SELECT a.walker_id AS walker_id, json_extract(d.value, '$[0]') AS day,
                            SUM(json_extract(d.value, '$[1]')) AS points
                        FROM allocations a,
                            json_each('[[' || replace(replace(a.draws, ',', '],['), ':', ',') || ']]') AS d
                        WHERE a.status = 'provisional' AND a.draws <> ''
                            AND (',' || a.pending_days || ',') LIKE ('%,' || json_extract(d.value, '$[0]') || ',%')
                        GROUP BY a.walker_id, json_extract(d.value, '$[0]')
                    )
                    UPDATE step_logs SET energy_drawn = drawn.points FROM drawn
                    WHERE step_logs.walker_id = drawn.walker_id AND step_logs.day = drawn.day
                    """
                }
            return ["ALTER TABLE step_logs ADD COLUMN energy_drawn BIGINT NOT NULL DEFAULT 0", backfill]
        },
        Migration(version: 28, name: "the oldest build that may run on the schema") { _ in
            // One row: the newest migration applied that the builds before it may not run beside
            // (`Migration.mixes`). A build whose own newest migration is older refuses the schema at start-up
            // (`Migrator.requireCurrent`). Of those before it, 27 is the newest, and a database reaching 28 has it.
            [
                "CREATE TABLE schema_compatibility (oldest_build_version BIGINT NOT NULL)",
                "INSERT INTO schema_compatibility (oldest_build_version) VALUES (27)",
            ]
        },
        Migration(
            version: 29, name: "what a day's acceptance and re-read request judged, on the walker's arrivals"
        ) { _ in
            // A reviewer's acceptance and a re-read request judge the day's submissions that had arrived; those
            // after them are judged again. They were told apart by the decision's time against each submission's
            // arrival, two clocks when two instances are involved: a submission taken just after an acceptance by an
            // instance whose clock is behind the reviewer's read as judged by it, and its count went uncredited.
            // `judged_through` is one millisecond past the last arrival the decision saw, on the arrivals' own scale
            // (each a millisecond after the walker's one before); rows from before keep NULL and their time.
            [
                "ALTER TABLE review_queue ADD COLUMN judged_through BIGINT",
                "ALTER TABLE step_rereads ADD COLUMN judged_through BIGINT",
            ]
        },
        Migration(version: 30, name: "the root each App Attest key was attested under") { _ in
            // A key the development CA (`stepd device`) attested counts only while `dev.appAttestAuthority` is on:
            // a closed beta's simulated devices must not go on asserting once the server trusts Apple's root alone
            // (production, or the setting turned off on the same database). `apple` is the configured root
            // (Apple's, or `appAttest.rootCertificateFile`). Keys from before are told by the receipt every
            // development attestation carries; a key an older build registers beside this one reads `apple`.
            [
                "ALTER TABLE app_attest_keys ADD COLUMN authority TEXT NOT NULL DEFAULT 'apple'",
                """
                UPDATE app_attest_keys SET authority = 'development'
                WHERE receipt = '\(Migrations.developmentReceiptBase64)'
                """,
            ]
        },
    ]

    /// Base64 of the receipt the development CA puts in every attestation it makes
    /// (`AppAttestDevelopmentAuthority.placeholderReceipt`, which StepStore does not import; a test holds the two
    /// equal), as `app_attest_keys.receipt` stores it.
    package static let developmentReceiptBase64 = "U3RlcExlZGdlciBkZXZlbG9wbWVudCBBcHAgQXR0ZXN0IHJlY2VpcHQgKG5vdCBDTVMp"

    /// The migration that made `schema_compatibility`.
    package static let compatibilityVersion = 28
}

/// What `Migrator.migrate` did.
package struct MigrationReport: Sendable, Equatable {
    package var applied: [Int]
    package var current: Int
}

/// Applies pending migrations, each in its own transaction, recording them in `schema_migrations`.
package struct Migrator: Sendable {
    package let database: any Database
    package let migrations: [Migration]

    /// PostgreSQL: how long (milliseconds) a migration waits for another session's lock before it rolls back and
    /// tries again (`SET LOCAL lock_timeout`, so nothing else and no pooler sees the setting); nil: no bound but
    /// `statement_timeout`. `stepd migrate` sets it.
    package var lockTimeout: Int?
    /// Throws `StoreError.schemaBehind` when a migration of this build is pending, and `StoreError.schemaAhead`
    /// when a newer build applied a migration this one may not run beside (`Migration.mixes`): `serve`, `worker`
    /// and the commands that work on a database refuse a schema they were not built for. A newer schema whose
    /// migrations all mix is served (a rolling upgrade, or going back a release).
    package func requireCurrent() async throws {
        let applied = try await appliedVersions()
        guard migrations.allSatisfy({ applied.contains($0.version) }) else {
            if applied.isEmpty { try await refuseOtherApplications() }
            throw StoreError.schemaBehind("the database schema is behind this build; run `stepd migrate` first")
        }
        if let oldest = try await oldestBuildVersion(applied: applied), oldest > latestVersion {
            throw StoreError.schemaAhead(
                "the database schema was migrated by a newer build (migration \(oldest)) that builds before it may "
                    + "not run beside; this build knows migrations up to \(latestVersion): run that build or a newer one "
                    + "(CHANGELOG.md, Upgrading)")
        }
    }

    /// The newest migration applied that the builds before it may not run beside (`schema_compatibility`), nil
    /// before migration 28 made the table.
    package func oldestBuildVersion(applied: Set<Int>) async throws -> Int? {
        guard applied.contains(Migrations.compatibilityVersion) else { return nil }
        return try await database.transaction { sql in
            let row = try await sql.raw("SELECT MAX(oldest_build_version) AS version FROM schema_compatibility").first()
            return try row?.decode(column: "version", as: Int?.self)
        }
    }

    /// PostgreSQL: StepLedger's `schema_migrations`, looked up in the current schema only (the one `ensureTable`
    /// creates it in): another tool's table of that name in a schema later on the search path is not StepLedger's.
    static let ownMigrationTable = "to_regclass(quote_ident(current_schema()) || '.schema_migrations')"

    /// `stepd migrate --other-tables`: migrate a database that holds other applications' tables and no StepLedger
    /// schema yet (a database shared on purpose). Off, such a database is refused (`refuseOtherApplications`).
    package var allowsOtherTables = false

    /// With no `schema_migrations` (nothing of StepLedger's), a database whose schema holds tables is another
    /// application's: `database.url` names the wrong database, and "run `stepd migrate`" would put StepLedger's
    /// tables beside that application's. Throws naming up to three of them; tables an extension owns (PostGIS's
    /// `spatial_ref_sys`) do not count. One statement, which finds nothing once `schema_migrations` is there: another
    /// instance's first migration, committed since the caller looked, is StepLedger's own.
    func refuseOtherApplications() async throws {
        let statement: SQLQueryString =
            switch database.kind {
            case .postgres:
                """
                SELECT c.relname AS name FROM pg_class c
                WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
                    AND c.relkind IN ('r', 'p')
                    AND NOT EXISTS (SELECT 1 FROM pg_depend d
                        WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
                    AND \(unsafeRaw: Self.ownMigrationTable) IS NULL
                ORDER BY c.relname LIMIT 3
                """
            case .sqlite:
                """
                SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'
                    AND NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')
                ORDER BY name LIMIT 3
                """
            }
        let names = try await database.transaction { sql in
            try await sql.raw(statement).all().map { try $0.decode(column: "name", as: String.self) }
        }
        guard !names.isEmpty else { return }
        throw StoreError.invalidConfiguration(
            "the database holds another application's tables (\(names.joined(separator: ", ")), …) and no StepLedger "
                + "schema: check database.url (stepd migrate --other-tables migrates it all the same)")
    }

    /// How long a migration blocked by other sessions' locks keeps trying (`retryingLocks`).
    package var lockRetrySeconds: Double = 600

    package init(database: any Database, migrations: [Migration] = Migrations.all) {
        self.database = database
        self.migrations = migrations
    }

    package var latestVersion: Int { migrations.map(\.version).max() ?? 0 }

    /// The versions recorded in `schema_migrations`, read without writing anything: the table is created only by
    /// `migrate()`, under the migrations' lock (two `CREATE TABLE IF NOT EXISTS` at once can fail on PostgreSQL's
    /// catalog index), and a serving role that does not own the schema has no right to create it (on PostgreSQL 15
    /// only the owner may create in `public`). What is committed is read without waiting for a migration that runs.
    package func appliedVersions() async throws -> Set<Int> {
        // PostgreSQL leaves out of the search path a schema the role may not use (no USAGE): then no schema is
        // current, and the table would seem missing. Said as what it is, not as a schema behind the build.
        // `ours`: how many of StepLedger's three columns the table has. Other tools name their table the same
        // (golang-migrate, Rails, Ecto, dbmate), and theirs is another application's schema, not a StepLedger one.
        let present: SQLQueryString =
            switch database.kind {
            case .postgres:
                """
                SELECT \(unsafeRaw: Self.ownMigrationTable) IS NOT NULL AS present,
                    current_schema() IS NULL AS unusable,
                    (SELECT COUNT(*) FROM pg_attribute
                        WHERE attrelid = \(unsafeRaw: Self.ownMigrationTable)
                        AND attname IN ('version', 'name', 'applied_at') AND NOT attisdropped) AS ours
                """
            case .sqlite:
                """
                SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')
                    AS present, 0 AS unusable,
                    (SELECT COUNT(*) FROM pragma_table_info('schema_migrations')
                        WHERE name IN ('version', 'name', 'applied_at')) AS ours
                """
            }
        return try await database.transaction { sql in
            let row = try await sql.raw(present).first()
            guard try row?.decode(column: "present", as: Bool.self) == true else {
                if try row?.decode(column: "unusable", as: Bool.self) == true {
                    throw StoreError.invalidConfiguration(
                        "PostgreSQL: the database role may use no schema of its search_path (GRANT USAGE ON SCHEMA "
                            + "to it; see docs/production.md)")
                }
                return []
            }
            guard try row?.decode(column: "ours", as: Int.self) == 3 else {
                throw StoreError.invalidConfiguration(
                    "the database holds a schema_migrations table that is not StepLedger's (another application's "
                        + "migrations): check database.url; StepLedger needs a database of its own, or on PostgreSQL "
                        + "a schema of its own first on the role's search_path (docs/production.md)")
            }
            let rows = try await sql.raw("SELECT version FROM schema_migrations").all()
            return Set(try rows.map { try $0.decode(column: "version", as: Int.self) })
        }
    }

    /// Pending versions, ascending.
    package func pending() async throws -> [Int] {
        let applied = try await appliedVersions()
        return migrations.map(\.version).filter { !applied.contains($0) }.sorted()
    }

    /// Applies every pending migration in order, each in its own transaction. `applied` hears of each as it
    /// commits, so a caller can say what was done when a later one fails.
    @discardableResult
    package func migrate(now: Date = Date(), applied onApplied: @Sendable (Int) -> Void = { _ in }) async throws
        -> MigrationReport
    {
        // Read first even with `allowsOtherTables`: another tool's `schema_migrations` is refused either way.
        if try await appliedVersions().isEmpty, !allowsOtherTables { try await refuseOtherApplications() }
        var applied: [Int] = []
        let kind = database.kind
        for migration in migrations.sorted(by: { $0.version < $1.version }) {
            let didApply = try await retryingLocks {
                try await database.transaction { sql in
                    // Two instances starting together must not both apply a migration.
                    try await Self.lock(sql, kind: kind)
                    // Past the migrations' own lock (another `stepd migrate` is waited for as before), the change
                    // waits for other sessions' locks only `lockTimeout` at a time (`retryingLocks`).
                    if kind == .postgres, let lockTimeout {
                        try await sql.raw(SQLQueryString("SET LOCAL lock_timeout = \(unsafeRaw: String(lockTimeout))"))
                            .run()
                    }
                    try await Self.ensureTable(sql)
                    let exists = try await sql.raw(
                        "SELECT version FROM schema_migrations WHERE version = \(bind: migration.version)"
                    ).first()
                    guard exists == nil else { return false }
                    for statement in migration.statements(kind) {
                        try await sql.raw(SQLQueryString(statement)).run()
                    }
                    if !migration.mixes, migration.version > Migrations.compatibilityVersion {
                        try await sql.raw(
                            """
                            UPDATE schema_compatibility SET oldest_build_version = \(bind: migration.version)
                            WHERE oldest_build_version < \(bind: migration.version)
                            """
                        ).run()
                    }
                    try await sql.raw(
                        """
                        INSERT INTO schema_migrations (version, name, applied_at)
                        VALUES (\(bind: migration.version), \(bind: migration.name), \(bind: now.millisecondsSince1970))
                        """
                    ).run()
                    return true
                }
            }
            if didApply {
                applied.append(migration.version)
                onApplied(migration.version)
            }
        }
        return MigrationReport(applied: applied, current: latestVersion)
    }

    /// Runs `work` (one migration's transaction) again while it fails for a lock it waited for too long
    /// (`StoreError.lockTimeout`, with `lock_timeout` set by `lockTimeout`) or was ended to break a deadlock
    /// (`StoreError.isDeadlock`: a migration that locks two tables in turn, against a request of a running build that
    /// takes them in the other order), for at most `lockRetrySeconds`: a schema change behind a long reader waits in
    /// short turns, and requests go on meanwhile.
    private func retryingLocks<T>(_ work: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        // The pause between turns grows to 8 s, so requests that queue behind a waiting change get the table back
        // most of the time rather than meet the next turn at once.
        var pause = 0.25
        while true {
            do {
                return try await work()
            } catch let error as StoreError where error.isLockTimeout || error.isDeadlock {
                guard ContinuousClock.now - started < .seconds(lockRetrySeconds) else { throw error }
                try await Task.sleep(for: .seconds(pause * Double.random(in: 0.75...1.25)))
                pause = min(pause * 2, 8)
            }
        }
    }

    /// The migrations' lock, held to the end of the transaction: one per schema on PostgreSQL; SQLite has one
    /// writer anyway.
    private static func lock(_ sql: any SQLDatabase, kind: DatabaseKind) async throws {
        guard kind == .postgres else { return }
        try await sql.raw("SELECT pg_advisory_xact_lock(7301957, hashtext(current_schema()))").run()
    }

    private static func ensureTable(_ sql: any SQLDatabase) async throws {
        try await sql.raw(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version BIGINT PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at BIGINT NOT NULL
            )
            """
        ).run()
    }
}

extension Date {
    /// Milliseconds since 1970, held to `Int`'s range: a date no clock or validated input gives (beyond about
    /// 292 million years) comes out as `Int.max` or `Int.min` rather than trapping the process.
    package var millisecondsSince1970: Int {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        if milliseconds.isNaN { return 0 }
        // Double(Int.max) is 2^63, one past Int.max; Double(Int.min) is -2^63 exactly.
        if milliseconds >= Double(Int.max) { return .max }
        if milliseconds < Double(Int.min) { return .min }
        return Int(milliseconds)
    }

    package init(millisecondsSince1970 ms: Int) {
        self.init(timeIntervalSince1970: Double(ms) / 1000)
    }
}
