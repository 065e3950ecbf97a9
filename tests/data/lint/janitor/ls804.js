/* purpose-built book for lorescan lint: ls804 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['wolf'], notAny: ['(dog|hound)'], scenario: 'Wolves.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
