;;; ptlint_eglot.el --- `ptlint server' from Emacs's eglot, in batch mode.
;;
;;   PTLINT_FILE=train.py emacs --batch -l tests/emacs/ptlint_eglot.el
;;
;; Opens PTLINT_FILE with the README's eglot set-up, waits for the findings
;; and prints them (file:line:column: type message), lists the code actions
;; of the first finding, applies the preferred one (the fix), prints the line
;; it changed and how many findings are left. The buffer is not saved.
;; PTLINT_CMD, if set, is the server's command (default: "ptlint server").
;; Emacs 29 has eglot built in; Emacs 28 needs it installed (Debian:
;; elpa-eglot), which `package-initialize' activates.

(package-initialize)

;; The README's set-up, as a user puts it in init.el:
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               '((python-mode python-ts-mode) . ("ptlint" "server"))))

(require 'eglot)
(require 'python)
(when (getenv "PTLINT_CMD")
  (add-to-list 'eglot-server-programs
               `((python-mode python-ts-mode) . ,(split-string (getenv "PTLINT_CMD")))))

(defun ptlint-wait (pred seconds)
  "Run timers and read the server until PRED holds or SECONDS pass."
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (flymake-start)
      (accept-process-output nil 0.2))
    (funcall pred)))

(defun ptlint-findings ()
  (sort (flymake-diagnostics)
        (lambda (a b) (< (flymake-diagnostic-beg a) (flymake-diagnostic-beg b)))))

(find-file (getenv "PTLINT_FILE"))
(python-mode)
(apply #'eglot (eglot--guess-contact))
(unless (ptlint-wait #'flymake-diagnostics 120)
  (message "no diagnostics")
  (kill-emacs 1))
(dolist (d (ptlint-findings))
  (save-excursion
    (goto-char (flymake-diagnostic-beg d))
    (message "%s:%d:%d: %s %s" (file-name-nondirectory buffer-file-name)
             (line-number-at-pos) (current-column)
             (flymake-diagnostic-type d) (flymake-diagnostic-text d))))
(let* ((count (length (flymake-diagnostics)))
       (first (car (ptlint-findings)))
       (beg (flymake-diagnostic-beg first))
       (actions (eglot-code-actions beg (flymake-diagnostic-end first)))
       (chosen (or (seq-find (lambda (a) (plist-get a :isPreferred)) actions)
                   (car actions))))
  (dolist (a actions)
    (message "action: %s%s" (plist-get a :title)
             (if (plist-get a :isPreferred) " (preferred)" "")))
  (message "applying: %s" (plist-get chosen :title))
  (eglot--apply-workspace-edit (plist-get chosen :edit))
  (goto-char beg)
  (message "line %d now: %s" (line-number-at-pos)
           (buffer-substring (line-beginning-position) (line-end-position)))
  (eglot--signal-textDocument/didChange)
  (ptlint-wait (lambda () (< (length (flymake-diagnostics)) count)) 60)
  (message "diagnostics after the fix: %d (before: %d)"
           (length (flymake-diagnostics)) count))
(kill-emacs 0)
