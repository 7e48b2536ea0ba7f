-- fsm_check_args_v1: validate the arguments shared by the write procedures (internal).
--
-- Parameters: p_key (required, 1-191 chars, not ending in a space), p_event (NULL or a name of at most 64),
--   p_data (NULL or a JSON object of at most 1 MiB), p_metadata (NULL or a JSON object of
--   at most 64 KiB), p_request_id (NULL or 1-64 chars), p_handler (NULL or 1-128 chars),
--   p_lookup_key (NULL or 1-191 chars).
-- Result: none.
-- Errors: 31008 invalid data or metadata; 31009 any other invalid argument.
-- Example: CALL fsm_check_args_v1('o-1', 'pay', '{}', NULL, NULL, NULL, NULL);
CREATE PROCEDURE `fsm_check_args_v1`(
  IN p_key TEXT CHARACTER SET utf8mb4, IN p_event TEXT CHARACTER SET utf8mb4,
  IN p_data LONGTEXT CHARACTER SET utf8mb4, IN p_metadata LONGTEXT CHARACTER SET utf8mb4,
  IN p_request_id TEXT CHARACTER SET utf8mb4, IN p_handler TEXT CHARACTER SET utf8mb4,
  IN p_lookup_key TEXT CHARACTER SET utf8mb4)
NO SQL SQL SECURITY INVOKER
BEGIN
  -- Keys may not end in a space: utf8mb4_bin pads, so 'k ' and 'k' are the same key.
  IF p_key IS NULL OR CHAR_LENGTH(p_key) NOT BETWEEN 1 AND 191 OR p_key LIKE '% ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF p_event IS NOT NULL AND NOT fsm_valid_name_v1(p_event, 64) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: event must match [a-z][a-z0-9_]* and have at most 64 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_data IS NOT NULL AND NOT fsm_is_object_v1(p_data) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data must be a JSON object', MYSQL_ERRNO = 31008;
  END IF;
  IF LENGTH(p_data) > 1048576 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: data is larger than 1 MiB', MYSQL_ERRNO = 31008;
  END IF;
  IF p_metadata IS NOT NULL AND NOT fsm_is_object_v1(p_metadata) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: metadata must be a JSON object', MYSQL_ERRNO = 31008;
  END IF;
  IF LENGTH(p_metadata) > 65536 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: metadata is larger than 64 KiB', MYSQL_ERRNO = 31008;
  END IF;
  IF p_request_id IS NOT NULL AND (CHAR_LENGTH(p_request_id) NOT BETWEEN 1 AND 64 OR p_request_id LIKE '% ') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: request_id must be 1 to 64 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
  IF p_handler IS NOT NULL AND CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 128 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: handler must be 1 to 128 characters', MYSQL_ERRNO = 31009;
  END IF;
  IF p_lookup_key IS NOT NULL AND (CHAR_LENGTH(p_lookup_key) NOT BETWEEN 1 AND 191 OR p_lookup_key LIKE '% ') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'fsm: lookup_key must be 1 to 191 characters, not ending in a space', MYSQL_ERRNO = 31009;
  END IF;
END
