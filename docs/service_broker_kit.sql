-- poisonwatch kit for SQL Server Service Broker (seed 004: "record the failure outside the
-- transaction that read the message, in the CATCH block").
--
-- 1. dbo.poison_message_details: one row per attempt to process a received message
--    (seed 004's incident table, with the columns of the landing dataset ssb_receive_attempts).
-- 2. dbo.ProcessExpenseQueue: an activation procedure skeleton. It receives one message in a
--    transaction; when the conversation already has more than @threshold rolled-back
--    incidents it ends the conversation with an error (poison); otherwise it processes the
--    message. In CATCH it rolls back FIRST and only then inserts the incident, so the
--    rollback cannot undo the record. Variables keep the received values across the rollback.
-- 3. Three export views, one JSON object per row in the landing contract's columns:
--    dbo.poisonwatch_ssb_receive_attempts, dbo.poisonwatch_ssb_queue_snapshots (one per queue:
--    copy it for each queue) and dbo.poisonwatch_ssb_queue_states. Write them as .jsonl files:
--
--      bcp "SELECT line FROM Expenses.dbo.poisonwatch_ssb_receive_attempts" queryout
--          landing/ssb_receive_attempts/attempts-20260101T0000.jsonl -c -C 65001 -T -S myserver
--
--    (-C 65001: the files are UTF-8, as the landing reads them; names in other scripts survive.)
--
--    FOR JSON writes varbinary as base64 (message_body), bit as true/false, NULLs as null
--    (INCLUDE_NULL_VALUES), times as ISO-8601 with a Z (style 126 of a UTC datetime2).
--
-- RECEIVE and END CONVERSATION run through sys.sp_executesql with parameters (as the scripts
-- poisonwatch generates do): the same statements, and a file every T-SQL parser reads.
-- Replace ExpenseQueue / ProcessExpenseMessage with your queue and your processing procedure.
-- Run it like poisonwatch's scripts: sqlcmd -S <server> -d <database> -E -b -x -f 65001 -i <file>
-- (-x: no sqlcmd variable substitution; -f 65001: the file is UTF-8 without a byte-order mark).

CREATE TABLE dbo.poison_message_details (
    incident_id INT IDENTITY (1, 1) NOT NULL PRIMARY KEY,
    attempted_at DATETIME2 (7) NOT NULL DEFAULT SYSUTCDATETIME(),
    queue_name SYSNAME NOT NULL,
    conversation_group_id UNIQUEIDENTIFIER NULL,
    conversation_handle UNIQUEIDENTIFIER NOT NULL,
    message_sequence_number BIGINT NOT NULL,
    message_type_name SYSNAME NULL,
    outcome NVARCHAR(30) NOT NULL
    CHECK (
        outcome IN (
            N'committed', N'rolled_back', N'rolled_back_to_savepoint', N'ended_conversation'
        )
    ),
    error_number INT NULL,
    error_message NVARCHAR(4000) NULL,
    reader SYSNAME NULL,
    attempt_id UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID()
);
GO

CREATE INDEX ix_poison_message_details_handle
ON dbo.poison_message_details (conversation_handle);
GO

CREATE PROCEDURE dbo.ProcessExpenseQueue
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @threshold INT = 3;
    DECLARE @handle UNIQUEIDENTIFIER;
    DECLARE @group_id UNIQUEIDENTIFIER;
    DECLARE @sequence BIGINT;
    DECLARE @message_type SYSNAME;
    DECLARE @body VARBINARY(MAX);
    DECLARE @incidents INT;
    DECLARE @error_number INT;
    DECLARE @error_message NVARCHAR(4000);
    DECLARE @reader SYSNAME = OBJECT_NAME(@@PROCID);

    WHILE 1 = 1
    BEGIN
        SET @handle = NULL;
        BEGIN TRY
            BEGIN TRANSACTION;
            EXEC sys.sp_executesql
                N'WAITFOR (RECEIVE TOP (1) @handle = conversation_handle,
                    @group_id = conversation_group_id, @sequence = message_sequence_number,
                    @message_type = message_type_name, @body = message_body
                    FROM dbo.ExpenseQueue), TIMEOUT 5000;',
                N'@handle UNIQUEIDENTIFIER OUTPUT, @group_id UNIQUEIDENTIFIER OUTPUT,
                    @sequence BIGINT OUTPUT, @message_type SYSNAME OUTPUT,
                    @body VARBINARY(MAX) OUTPUT',
                @handle = @handle OUTPUT,
                @group_id = @group_id OUTPUT,
                @sequence = @sequence OUTPUT,
                @message_type = @message_type OUTPUT,
                @body = @body OUTPUT;
            IF @handle IS NULL
                BEGIN
                    ROLLBACK TRANSACTION;
                    BREAK;
                END;

            SELECT @incidents = COUNT(*)
            FROM dbo.poison_message_details
            WHERE
                conversation_handle = @handle
                AND outcome IN (N'rolled_back', N'rolled_back_to_savepoint');

            IF @incidents > @threshold
                BEGIN
                    -- Poison (seed 004: at least @threshold returns to the queue): end the
                    -- conversation with an error, commit, record it.
                    EXEC sys.sp_executesql
                        N'END CONVERSATION @handle WITH ERROR = 500
                            DESCRIPTION = N''Unable to process message.'';',
                        N'@handle UNIQUEIDENTIFIER',
                        @handle = @handle;
                    COMMIT TRANSACTION;
                    INSERT INTO dbo.poison_message_details (
                        queue_name, conversation_group_id, conversation_handle,
                        message_sequence_number, message_type_name, outcome, reader
                    )
                    VALUES (
                        N'ExpenseQueue', @group_id, @handle, @sequence, @message_type,
                        N'ended_conversation', @reader
                    );
                    CONTINUE;
                END;

            EXEC dbo.ProcessExpenseMessage @handle, @message_type, @body;
            COMMIT TRANSACTION;
            INSERT INTO dbo.poison_message_details (
                queue_name, conversation_group_id, conversation_handle,
                message_sequence_number, message_type_name, outcome, reader
            )
            VALUES (
                N'ExpenseQueue', @group_id, @handle, @sequence, @message_type,
                N'committed', @reader
            );
        END TRY
        BEGIN CATCH
            SET @error_number = ERROR_NUMBER();
            SET @error_message = ERROR_MESSAGE();
            -- Roll back first: the message goes back to the queue ...
            IF XACT_STATE() <> 0
                ROLLBACK TRANSACTION;
            -- ... then record the incident, outside the rolled-back transaction (seed 004).
            IF @handle IS NOT NULL
                INSERT INTO dbo.poison_message_details (
                    queue_name, conversation_group_id, conversation_handle,
                    message_sequence_number, message_type_name, outcome, error_number,
                    error_message, reader
                )
                VALUES (
                    N'ExpenseQueue', @group_id, @handle, @sequence, @message_type,
                    N'rolled_back', @error_number, @error_message, @reader
                );
        END CATCH;
    END;
END;
GO

-- ssb_receive_attempts: every recorded attempt (add WHERE sort_key > <last export> to the
-- bcp query for incremental exports).
CREATE VIEW dbo.poisonwatch_ssb_receive_attempts
AS
SELECT
    d.attempted_at AS sort_key,
    (
        SELECT
            CONVERT(VARCHAR(33), d.attempted_at, 126) + 'Z' AS attempted_at,
            CAST(@@SERVERNAME AS NVARCHAR(128)) AS server_name,
            DB_NAME() AS database_name,
            d.queue_name AS queue_name,
            d.conversation_group_id AS conversation_group_id,
            d.conversation_handle AS conversation_handle,
            d.message_sequence_number AS message_sequence_number,
            d.message_type_name AS message_type_name,
            d.outcome AS outcome,
            d.error_number AS error_number,
            d.error_message AS error_message,
            d.reader AS reader,
            d.attempt_id AS attempt_id
        FOR JSON PATH, WITHOUT_ARRAY_WRAPPER, INCLUDE_NULL_VALUES
    ) AS line
FROM dbo.poison_message_details AS d;
GO

-- ssb_queue_snapshots: the messages in one queue now (SELECT from a queue does not receive).
CREATE VIEW dbo.poisonwatch_ssb_queue_snapshots
AS
SELECT (
    SELECT
        CONVERT(VARCHAR(33), SYSUTCDATETIME(), 126) + 'Z' AS snapshot_at,
        CAST(@@SERVERNAME AS NVARCHAR(128)) AS server_name,
        DB_NAME() AS database_name,
        N'ExpenseQueue' AS queue_name,
        q.status AS status,
        q.priority AS priority,
        q.queuing_order AS queuing_order,
        q.conversation_group_id AS conversation_group_id,
        q.conversation_handle AS conversation_handle,
        q.message_sequence_number AS message_sequence_number,
        q.service_name AS service_name,
        q.service_contract_name AS service_contract_name,
        q.message_type_name AS message_type_name,
        q.validation AS validation,
        q.message_body AS message_body,
        CONVERT(VARCHAR(33), q.message_enqueue_time, 126) + 'Z' AS message_enqueue_time
    FOR JSON PATH, WITHOUT_ARRAY_WRAPPER, INCLUDE_NULL_VALUES
) AS line
FROM dbo.ExpenseQueue AS q WITH (NOLOCK);
GO

-- ssb_queue_states: sys.service_queues now (is_receive_enabled = 0: disabled by five rollbacks).
CREATE VIEW dbo.poisonwatch_ssb_queue_states
AS
SELECT (
    SELECT
        CONVERT(VARCHAR(33), SYSUTCDATETIME(), 126) + 'Z' AS snapshot_at,
        CAST(@@SERVERNAME AS NVARCHAR(128)) AS server_name,
        DB_NAME() AS database_name,
        s.name AS queue_name,
        s.is_receive_enabled AS is_receive_enabled,
        s.is_enqueue_enabled AS is_enqueue_enabled,
        s.is_activation_enabled AS is_activation_enabled,
        s.is_poison_message_handling_enabled AS is_poison_message_handling_enabled,
        s.activation_procedure AS activation_procedure,
        s.max_readers AS max_readers
    FOR JSON PATH, WITHOUT_ARRAY_WRAPPER, INCLUDE_NULL_VALUES
) AS line
FROM sys.service_queues AS s
WHERE s.is_ms_shipped = 0;
GO
