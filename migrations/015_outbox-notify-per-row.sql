-- Up Migration

-- The outbox NOTIFY of migration 010 fired once per INSERT statement, and a statement-level
-- trigger fires even when the statement inserted nothing. Every metering statement carries an
-- INSERT INTO outbox_events for the events it may raise (wallet.low, chat.completion.finished...),
-- usually of no rows, so every metered call woke every listening relay for nothing: 7,456
-- notifications for about 7,500 calls of the hot-path bench, none of them with an event. A row
-- trigger notifies only for rows that exist; a transaction's identical notifications still
-- collapse into one.
DROP TRIGGER outbox_events_notify ON outbox_events;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events FOR EACH ROW EXECUTE FUNCTION outbox_events_notify();

-- Down Migration
DROP TRIGGER outbox_events_notify ON outbox_events;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify();
