import GRDB

/// The store's SQLite schema (SPEC.md, "Store"). Migrations are never edited once shipped.
enum StoreSchema {
    /// `PRAGMA application_id`: "Conc".
    static let applicationID: Int32 = 0x436F_6E63
    /// `PRAGMA user_version`: the newest schema this build writes and reads.
    static let version = 9

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value NOT NULL
                ) WITHOUT ROWID;

                CREATE TABLE replicas (
                    idx INTEGER PRIMARY KEY,
                    id BLOB NOT NULL UNIQUE CHECK (length(id) = 16),
                    contiguous INTEGER NOT NULL DEFAULT 0 CHECK (contiguous >= 0)
                );

                CREATE TABLE log (
                    replica INTEGER NOT NULL REFERENCES replicas(idx),
                    first_seq INTEGER NOT NULL CHECK (first_seq >= 1),
                    last_seq INTEGER NOT NULL,
                    max_ts INTEGER NOT NULL,
                    ops BLOB NOT NULL,
                    PRIMARY KEY (replica, first_seq),
                    CHECK (last_seq >= first_seq)
                ) WITHOUT ROWID;
                CREATE INDEX log_by_time ON log(max_ts);

                CREATE TABLE reminders (
                    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
                    title TEXT,
                    notes TEXT,
                    due INTEGER,
                    priority INTEGER,
                    completed INTEGER,
                    snoozed_until INTEGER,
                    repeat TEXT,
                    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
                    tags TEXT NOT NULL DEFAULT '[]',
                    crdt BLOB NOT NULL
                ) WITHOUT ROWID;

                CREATE TABLE notes (
                    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
                    title TEXT,
                    body TEXT,
                    pinned INTEGER,
                    deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
                    tags TEXT NOT NULL DEFAULT '[]',
                    crdt BLOB NOT NULL
                ) WITHOUT ROWID;

                CREATE TABLE other_records (
                    kind INTEGER NOT NULL CHECK (kind NOT IN (0, 1, 2)),
                    id BLOB NOT NULL CHECK (length(id) = 16),
                    crdt BLOB NOT NULL,
                    PRIMARY KEY (kind, id)
                ) WITHOUT ROWID;

                PRAGMA user_version = 1;
                """)
        }
        // v2 and v4 make the shared-folder sync's tables, which ConcordExchange alone reads and
        // writes (FolderRecords). They are made here, with the store's own, because one
        // user_version numbers every table of the file (SPEC.md §9): a store holds them from its
        // creation, whichever module opened it first, and a build that knows schema N knows all
        // of its tables. A sequence of Exchange's own, run when it first syncs a store, would
        // let a store of schema 5 lack them: a new format, not a move.
        migrator.registerMigration("v2 shared folders") { db in
            try db.execute(sql: """
                CREATE TABLE folder_files (
                    folder TEXT NOT NULL,
                    name TEXT NOT NULL,
                    size INTEGER NOT NULL CHECK (size >= 0),
                    top TEXT NOT NULL,
                    PRIMARY KEY (folder, name)
                ) WITHOUT ROWID;

                PRAGMA user_version = 2;
                """)
        }
        migrator.registerMigration("v3 merges applied in record order") { db in
            try db.execute(sql: """
                CREATE TABLE pending_merge (
                    replica INTEGER NOT NULL,
                    first_seq INTEGER NOT NULL,
                    applied_through BLOB CHECK (applied_through IS NULL OR length(applied_through) = 17),
                    PRIMARY KEY (replica, first_seq)
                ) WITHOUT ROWID;

                PRAGMA user_version = 3;
                """)
        }
        migrator.registerMigration("v4 shared-folder files known by content") { db in
            // The old records knew a file by (name, size) and trusted its manifest's top. The new
            // ones know it by content and record what it holds; every file is read once more
            // (finding its operations held) to fill them in. The highest serial this replica
            // published in each folder is kept (SPEC.md §14); its old files, no longer known to
            // be its own, are never coalesced.
            try db.execute(sql: """
                CREATE TABLE folder_serials (
                    folder TEXT NOT NULL,
                    replica BLOB NOT NULL CHECK (length(replica) = 16),
                    last INTEGER NOT NULL CHECK (last >= 0),
                    PRIMARY KEY (folder, replica)
                ) WITHOUT ROWID;
                INSERT INTO folder_serials (folder, replica, last)
                    SELECT folder, (SELECT value FROM meta WHERE key = 'replica_id'), MAX(CAST(substr(name, 34, 10) AS INTEGER))
                    FROM folder_files
                    WHERE length(name) = 51 AND substr(name, 1, 32) = (SELECT lower(hex(value)) FROM meta WHERE key = 'replica_id')
                    GROUP BY folder;
                DROP TABLE folder_files;
                CREATE TABLE folder_files (
                    folder TEXT NOT NULL,
                    name TEXT NOT NULL,
                    identity TEXT NOT NULL,
                    sha256 BLOB NOT NULL CHECK (length(sha256) = 32),
                    key_id BLOB CHECK (key_id IS NULL OR length(key_id) = 8),
                    holds TEXT NOT NULL,
                    published INTEGER NOT NULL CHECK (published IN (0, 1)),
                    skipped TEXT,
                    PRIMARY KEY (folder, name)
                ) WITHOUT ROWID;

                PRAGMA user_version = 4;
                """)
        }
        migrator.registerMigration("v5 heads and operation spans") { db in
            // Records keep their registers' heads and where their operations are in the log, in
            // `crdt` format 2, and how many of their fields are in conflict, in `conflicts`. Every log row is listed as pending from its first record, so that
            // its operations are applied once more (which changes no value) and fill them in; a
            // store opened for writing does that first (SPEC.md §9).
            try db.execute(sql: """
                ALTER TABLE reminders ADD COLUMN conflicts INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE notes ADD COLUMN conflicts INTEGER NOT NULL DEFAULT 0;
                INSERT OR REPLACE INTO pending_merge (replica, first_seq, applied_through)
                    SELECT replica, first_seq, NULL FROM log;

                PRAGMA user_version = 5;
                """)
        }
        migrator.registerMigration("v6 purges") { db in
            // The records purged, whose rows are gone (SPEC.md §5.7); how many transactions erased
            // content, and how many had when each of this replica's folder files was published,
            // so that a folder sync rewrites the files that may hold erased content (§14). The
            // records of files skipped as of a newer bundle format go: this build may read them.
            try db.execute(sql: """
                DELETE FROM folder_files WHERE skipped LIKE '%is newer than this build reads%';
                CREATE TABLE purged (
                    id BLOB NOT NULL CHECK (length(id) = 16),
                    kind INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 255),
                    PRIMARY KEY (id, kind)
                ) WITHOUT ROWID;
                INSERT INTO meta (key, value) VALUES ('erasures', 0);
                ALTER TABLE folder_files ADD COLUMN erasures INTEGER NOT NULL DEFAULT 0;

                PRAGMA user_version = 6;
                """)
        }
        migrator.registerMigration("v7 compaction") { db in
            // Log rows may hold compacted seqs, which older builds refuse as malformed; how many
            // seqs the store holds so, which decides the format of its bundles; and where this
            // store's compactions trimmed each record's history (SPEC.md §5.8, §9, §13).
            try db.execute(sql: """
                INSERT INTO meta (key, value) VALUES ('compacted', 0);
                CREATE TABLE compacted_records (
                    id BLOB NOT NULL CHECK (length(id) = 16),
                    kind INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 255),
                    through INTEGER NOT NULL,
                    PRIMARY KEY (id, kind)
                ) WITHOUT ROWID;

                PRAGMA user_version = 7;
                """)
        }
        migrator.registerMigration("v8 compacted folders") { db in
            // How many seqs the store held compacted when each of this replica's folder files was
            // published, so that a folder sync rewrites its files once its compactions dropped
            // enough of what they hold (SPEC.md §14, "Compaction").
            try db.execute(sql: """
                ALTER TABLE folder_files ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;

                PRAGMA user_version = 8;
                """)
        }
        migrator.registerMigration("v9 replica vectors") { db in
            // What each other replica is known to hold, from the exports it sent or published:
            // where the stable frontier lies (SPEC.md §5.8, "Stable removes"; §9).
            try db.execute(sql: """
                CREATE TABLE replica_vectors (
                    replica BLOB PRIMARY KEY CHECK (length(replica) = 16),
                    vector TEXT NOT NULL,
                    heard INTEGER NOT NULL
                ) WITHOUT ROWID;

                PRAGMA user_version = 9;
                """)
        }
        return migrator
    }
}
