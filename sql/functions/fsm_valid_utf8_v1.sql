-- fsm_valid_utf8_v1: does p_text hold no encoded surrogate (internal, used by the triggers)?
--
-- MariaDB's utf8mb4 refuses most byte sequences that are not UTF-8 (error 1366) but takes
-- the encoded surrogates ED A0 80 ... ED BF BF, which no UTF-8 decoder accepts (PyMySQL
-- failed in the middle of a result). So text the server took is valid UTF-8 unless an ED
-- byte is followed by A0-BF. ED is never a continuation byte, so every ED is where a
-- character starts, and texts may be concatenated before the check (as binary: a text the
-- server took never ends in a lone ED). Converting to utf16 would tell too, but under a
-- strict sql_mode that conversion is an error (1977) inside a writing statement.
-- Callers test INSTR(text, 0xED) = 0 first: most text has no ED byte at all; the loop
-- costs one step per ED (Hangul from U+D000 starts with it).
-- Parameters: p_text (bytes; NULL counts as valid).
-- Returns: 1 or 0.
-- Errors: none.
-- Example: SELECT fsm_valid_utf8_v1(0xED959C), fsm_valid_utf8_v1(0xEDA080);  -- 1 (U+D55C), 0
CREATE FUNCTION `fsm_valid_utf8_v1`(p_text LONGBLOB)
RETURNS TINYINT DETERMINISTIC NO SQL SQL SECURITY INVOKER
BEGIN
  DECLARE v_at BIGINT DEFAULT LOCATE(0xED, p_text);
  WHILE v_at > 0 DO
    IF ASCII(SUBSTRING(p_text, v_at + 1, 1)) BETWEEN 160 AND 191 THEN
      RETURN 0;
    END IF;
    SET v_at = LOCATE(0xED, p_text, v_at + 1);
  END WHILE;
  RETURN 1;
END
